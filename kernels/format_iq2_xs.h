// IQ2_XS: 256 values in 74 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-65 32 uint16, one per group g of 8 values: bits 0-8 its iq2xs_grid entry,
//   bits 9-15 its sign index (ksigns)   66-73 a 4-bit scale per 16 values: nibble (j / 16) % 2 of
//   byte 66 + j / 32 for value j
//   value = (d * (0.5 + scale) * 0.25) * (+-grid value), exact as IQ2_XXS's.
#pragma once
#include "format_iq_selectors.h"
#include "iq2xs_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ2_XS> : ByteLevels<Format<ggml::IQ2_XS>> {
  enum { block_values = 256, block_bytes = 74, affine_values = 16, level_bits = 7, zero = iq2xs_grid_largest };
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq2xs_grid); SignSelectors::share(); }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    uint32_t qs[1];  // the uint16 of group j / 8 (and of the next, for N = 16)
    bytes_at<(N > 8 ? 4 : 2), 2, UNIFORM>(block + 2 + 2 * (j / 8), qs);
    for (int c = 0; c < (N + 3) / 4; ++c) {
      const uint32_t q = (qs[0] >> (16 * (group_of<N>(j, c) - j / 8))) & 0xFFFFu, k = in_group<N>(j, c);
      w[c] = selected_word<zero, iq2xs_grid_levels>(MUSER_GRID(iq2xs_grid)[q & 511u] | SignSelectors::select(q >> 9), k);
    }
    const uint32_t scale = (uint32_t(block[66 + j / 32]) >> (4 * (j / 16 % 2))) & 15u;
    return Affine{f16_at(block) * level(scale, -0.5f) * 0.25f, 0.0f};
  }
};

}  // namespace muser
