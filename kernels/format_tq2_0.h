// TQ2_0: 256 ternary values in 66 bytes (blocks 2-byte aligned).
//   0-63 qs   64-65 d (f16)
//   level q: format_two_bits.h
//   value = d * (q - 1)
#pragma once
#include "format_two_bits.h"

namespace muser {

template <>
struct Format<ggml::TQ2_0> : ByteLevels<Format<ggml::TQ2_0>> {
  enum { block_values = 256, block_bytes = 66, affine_values = 32, level_bits = 2, zero = 1, decodes_runs = 1, offsets = 1 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  enum { qs_at = 0, d_at = 64 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    two_bits<N, 2, UNIFORM>(block + qs_at, i % block_values, w);
    return Affine{f16_at(block + d_at), 0.0f};
  }
  template <int RUNS, typename P>
  static MUSER_FN void run_levels(P row, uint32_t i, MUSER_LOCAL uint32_t* w, MUSER_LOCAL Affine* a) {
    P block = row + (i / block_values) * block_bytes;
    two_bit_runs<RUNS, 2>(block + qs_at, i % block_values, w);
    const Affine both{f16_at(block + d_at), 0.0f};
    for (int q = 0; q < RUNS; ++q) {
      a[q] = both;
    }
  }
};

}  // namespace muser
