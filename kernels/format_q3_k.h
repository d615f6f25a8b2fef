// Q3_K: 256 values in 110 bytes (blocks 2-byte aligned), sixteen sub-blocks of 16.
//   0-31 hmask   32-95 qs   96-107 sixteen 6-bit scales   108-109 d (f16)
//   level of value v = 128p + 32s + l (p = 0, 1; s = 0..3; l = 0..31), 3 bits:
//     q = h ll   h: bit v / 32 of hmask[l]   ll: format_two_bits.h
//   value = (d * (scale[t] - 32)) * (q - 4), t = v / 16
// Scale t, 6 bits hh llll: llll = nibble t / 8 of byte t % 8, hh = bits 2 (t / 4), +1 of byte
// 8 + t % 4 (of the 12).
#pragma once
#include "format_two_bits.h"

namespace muser {

template <>
struct Format<ggml::Q3_K> : ByteLevels<Format<ggml::Q3_K>> {
  enum { block_values = 256, block_bytes = 110, affine_values = 16, level_bits = 3, zero = 4, decodes_runs = 1 };
  enum { word_rows = 0 };  // its one-row head measured slower through muser_row (formats.h)
  enum { hmask_at = 0, qs_at = 32, scales_at = 96, scales_high_at = 104, d_at = 108 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    uint32_t hmask[(N + 3) / 4];
    two_bits<N, 2, UNIFORM>(block + qs_at, j, w);
    bytes_at<N, 2, UNIFORM>(block + hmask_at + j % 32, hmask);
    high_bits<(N + 3) / 4>(hmask, j / 32, w);
    return Affine{f16_at(block + d_at) * scale(block, j / 16), 0.0f};
  }
  // Runs j + 32 q share their qs bytes (format_two_bits.h) and hmask bytes (bits j / 32 + q).
  template <int RUNS, typename P>
  static MUSER_FN void run_levels(P row, uint32_t i, MUSER_LOCAL uint32_t* w, MUSER_LOCAL Affine* a) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    uint32_t hmask[4];
    two_bit_runs<RUNS, 2>(block + qs_at, j, w);
    bytes_at<16, 2>(block + hmask_at + j % 32, hmask);
    const float d = f16_at(block + d_at);
    for (int q = 0; q < RUNS; ++q) {
      high_bits<4>(hmask, j / 32 + q, w + 4 * q);
      a[q] = Affine{d * scale(block, j / 16 + 2 * q), 0.0f};
    }
  }
  // Per byte of w: bit `bit` of hmask's byte above the two bits.
  template <int WORDS>
  static MUSER_FN void high_bits(MUSER_LOCAL const uint32_t* hmask, uint32_t bit, MUSER_LOCAL uint32_t* w) {
    for (int k = 0; k < WORDS; ++k) {
      w[k] |= ((hmask[k] >> bit) & 0x01010101u) << 2;
    }
  }
  template <typename P>
  static MUSER_FN float scale(P block, uint32_t t) {  // scale[t] - 32
    const uint32_t low = (uint32_t(block[scales_at + t % 8]) >> (4 * (t / 8))) & 15u;
    const uint32_t high = (uint32_t(block[scales_high_at + t % 4]) >> (2 * (t / 4))) & 3u;
    return level(low | (high << 4), 32.0f);
  }
};

}  // namespace muser
