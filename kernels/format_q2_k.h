// Q2_K: 256 values in 84 bytes (blocks 4-byte aligned), sixteen sub-blocks of 16.
//   0-15 scales (sub-block t: scale = low nibble of scales[t], min = high nibble)   16-79 qs
//   80-81 d (f16)   82-83 dmin (f16)
//   level q: format_two_bits.h
//   value = (d * scale[t]) * q - dmin * min[t], t = value index / 16
#pragma once
#include "format_two_bits.h"

namespace muser {

template <>
struct Format<ggml::Q2_K> : ByteLevels<Format<ggml::Q2_K>> {
  enum { block_values = 256, block_bytes = 84, affine_values = 16, level_bits = 2, zero = 0, decodes_runs = 1, offsets = 1 };
  enum { scales_at = 0, qs_at = 16, d_at = 80, dmin_at = 82 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    two_bits<N, 4, UNIFORM>(block + qs_at, j, w);
    const uint32_t scale_min = block[scales_at + j / 16];
    return affine(f16_at(block + d_at), f16_at(block + dmin_at), scale_min);
  }
  template <int RUNS, typename P>
  static MUSER_FN void run_levels(P row, uint32_t i, MUSER_LOCAL uint32_t* w, MUSER_LOCAL Affine* a) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    two_bit_runs<RUNS, 4>(block + qs_at, j, w);
    const float d = f16_at(block + d_at), dmin = f16_at(block + dmin_at);
    for (int q = 0; q < RUNS; ++q) {
      a[q] = affine(d, dmin, block[scales_at + j / 16 + 2 * q]);
    }
  }
  static MUSER_FN Affine affine(float d, float dmin, uint32_t scale_min) {
    return Affine{d * level(scale_min & 15u, 0.0f), dmin * level(scale_min >> 4, 0.0f)};
  }
};

}  // namespace muser
