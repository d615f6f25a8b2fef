// Q5_0: 32 values in 22 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-5 qh   6-21 qs   (format_high_bits.h: q = bit j of qh, nibble of qs)
//   value = d * (q - 16)
#pragma once
#include "format_high_bits.h"

namespace muser {

template <>
struct Format<ggml::Q5_0> : ByteLevels<Format<ggml::Q5_0>> {
  enum { block_values = 32, block_bytes = 22, affine_values = 32, level_bits = 5, zero = 16, run_pair = 16 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  enum { d_at = 0, qh_at = 2, qs_at = 6 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    half_nibbles<N, 16, 2, UNIFORM>(block + qs_at, j, w);
    add_high_bits<N, 2>(block + qh_at, j, w);
    return Affine{f16_at(block + d_at), 0.0f};
  }
};

}  // namespace muser
