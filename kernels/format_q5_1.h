// Q5_1: 32 values in 24 bytes (blocks 8-byte aligned).
//   0-1 d (f16)   2-3 m (f16)   4-7 qh   8-23 qs   (format_high_bits.h: q = bit j of qh, nibble of qs)
//   value = d * q + m
#pragma once
#include "format_high_bits.h"

namespace muser {

template <>
struct Format<ggml::Q5_1> : ByteLevels<Format<ggml::Q5_1>> {
  enum { block_values = 32, block_bytes = 24, affine_values = 32, level_bits = 5, zero = 0, run_pair = 16, offsets = 1 };
  enum { d_at = 0, m_at = 2, qh_at = 4, qs_at = 8 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    half_nibbles<N, 16, 8, UNIFORM>(block + qs_at, j, w);
    add_high_bits<N, 4>(block + qh_at, j, w);
    return Affine{f16_at(block + d_at), -f16_at(block + m_at)};
  }
};

}  // namespace muser
