// IQ3_S: 256 values in 110 bytes (blocks 2-byte aligned). Entry e: values 4e .. 4e + 3.
//   0-1 d (f16)   2-65 bits 0-7 of entry e's iq3s_grid index (byte 2 + e)   66-73 bit 8 of it:
//   bit e % 8 of byte 66 + e / 8   74-105 the 8 sign bits of each group of 8 values (byte 74 + j / 8
//   for value j; bit j % 8: minus)   106-109 a 4-bit scale per 32 values: nibble (j / 32) % 2 of
//   byte 106 + j / 64
//   value = (d * (1 + 2 * scale)) * (+-grid value): d's 11 bits times 5 times 4, exact in float32.
#pragma once
#include "format_iq_signs.h"
#include "iq3s_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ3_S> : ByteLevels<Format<ggml::IQ3_S>> {
  enum { block_values = 256, block_bytes = 110, affine_values = 32, level_bits = 5, zero = iq3s_grid_largest };
  enum { word_rows = 0 };  // its one-row head measured slower through muser_row (formats.h)
  enum { run_pair = 16 };  // values j .. j + 31 share a scale: one decode (bytedot.h)
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq3s_grid); }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    uint32_t low[(N + 15) / 16];  // the entries' low 8 bits
    bytes_at<(N + 3) / 4, (N > 4 ? 2 : 1), UNIFORM>(block + 2 + j / 4, low);
    const uint32_t high = uint32_t(block[66 + j / 32]) >> (j / 4 % 8);  // bit c: entry j / 4 + c's bit 8
    uint32_t signs[1];  // byte q: the sign bits of group j / 8 + q (one load)
    bytes_at<(N + 7) / 8, (N >= 16 ? 2 : 1), UNIFORM>(block + 74 + j / 8, signs);
    for (int c = 0; c < (N + 3) / 4; ++c) {  // word c: grid entry j / 4 + c
      const uint32_t entry = muser_byte_pair(low[c / 4], bits_to_bytes(high >> (c / 4 * 4)), c % 4);
      const uint32_t k = in_group<N>(j, c), q = group_of<N>(j, c) - j / 8;
      const uint32_t minus = SignMasks<false>::mask((signs[0] >> (8 * q)) & 255u, k / 4);
      w[c] = signed_word<N>(MUSER_GRID(iq3s_grid)[entry], minus, k, zero);
    }
    const uint32_t scale = (uint32_t(block[106 + j / 64]) >> (4 * (j / 32 % 2))) & 15u;
    return Affine{f16_at(block) * level(2 * scale + 1, 0.0f), 0.0f};
  }
};

}  // namespace muser
