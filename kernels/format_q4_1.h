// Q4_1: 32 values in 20 bytes (blocks 4-byte aligned).
//   0-1 d (f16)   2-3 m (f16)   4-19 qs   (format_half_nibbles.h: q = nibble of qs)
//   value = d * q + m
#pragma once
#include "format_half_nibbles.h"

namespace muser {

template <>
struct Format<ggml::Q4_1> : ByteLevels<Format<ggml::Q4_1>> {
  enum { block_values = 32, block_bytes = 20, affine_values = 32, level_bits = 4, zero = 0, run_pair = 16, offsets = 1 };
  enum { d_at = 0, m_at = 2, qs_at = 4 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    half_nibbles<N, 16, 4, UNIFORM>(block + qs_at, i % block_values, w);
    return Affine{f16_at(block + d_at), -f16_at(block + m_at)};
  }
};

}  // namespace muser
