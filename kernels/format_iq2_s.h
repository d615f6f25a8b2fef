// IQ2_S: 256 values in 82 bytes (blocks 2-byte aligned). Group g: values 8g .. 8g + 7.
//   0-1 d (f16)   2-33 bits 0-7 of group g's iq2s_grid entry (byte 2 + g)   34-65 group g's 8 sign
//   bits (byte 34 + g; bit k: value k is minus)   66-73 bits 8-9 of the entry: bits 2 (g % 4) .. +1
//   of byte 66 + g / 4   74-81 a 4-bit scale per 16 values (as IQ2_XS, from byte 74)
//   value = (d * (0.5 + scale) * 0.25) * (+-grid value), exact as IQ2_XXS's.
#pragma once
#include "format_iq_signs.h"
#include "iq2s_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ2_S> : ByteLevels<Format<ggml::IQ2_S>> {
  enum { block_values = 256, block_bytes = 82, affine_values = 16, level_bits = 7, zero = iq2s_grid_largest };
  enum { word_rows = 0 };  // its one-row head measured slower through muser_row (formats.h)
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq2s_grid); }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    for (int c = 0; c < (N + 3) / 4; ++c) {
      const uint32_t g = group_of<N>(j, c), k = in_group<N>(j, c);
      const uint32_t entry = uint32_t(block[2 + g]) | ((uint32_t(block[66 + g / 4]) >> (2 * (g % 4))) & 3u) << 8;
      w[c] = signed_word<N>(MUSER_GRID(iq2s_grid)[2 * entry + k / 4], SignMasks<false>::mask(block[34 + g], k / 4), k, zero);
    }
    const uint32_t scale = (uint32_t(block[74 + j / 32]) >> (4 * (j / 16 % 2))) & 15u;
    return Affine{f16_at(block) * level(scale, -0.5f) * 0.25f, 0.0f};
  }
};

}  // namespace muser
