// IQ2_XXS: 256 values in 66 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-65 eight sub-blocks s of 32 values, 8 bytes each (at 2 + 8s):
//     bytes 0-3  the iq2xxs_grid entry of each group l of 8 values (l = 0..3), one byte each
//     bytes 4-7  a uint32: bits 7l .. 7l+6 group l's sign index (ksigns), bits 28-31 the scale ls
//   value = (d * (0.5 + ls) * 0.25) * (+-grid value): d's 11 bits times ls's 5 times the
//   grid's 6, every product exact in float32.
#pragma once
#include "format_iq_selectors.h"
#include "iq2xxs_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ2_XXS> : ByteLevels<Format<ggml::IQ2_XXS>> {
  enum { block_values = 256, block_bytes = 66, affine_values = 32, level_bits = 7, zero = iq2xxs_grid_largest };
  enum { run_pair = 16 };  // values j .. j + 31 share a sub-block's scale and fields: one decode (bytedot.h)
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq2xxs_grid); SignSelectors::share(); }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256, s = j / 32;
    uint32_t aux[2];  // sub-block s: grid entries, then sign indices and scale
    bytes_at<8, 2, UNIFORM>(block + 2 + 8 * s, aux);
    for (int c = 0; c < (N + 3) / 4; ++c) {
      const uint32_t l = group_of<N>(j, c) % 4, k = in_group<N>(j, c);
      const uint32_t selector = MUSER_GRID(iq2xxs_grid)[(aux[0] >> (8 * l)) & 255u] | SignSelectors::select((aux[1] >> (7 * l)) & 127u);
      w[c] = selected_word<zero, iq2xxs_grid_levels>(selector, k);
    }
    return Affine{f16_at(block) * level(aux[1] >> 28, -0.5f) * 0.25f, 0.0f};
  }
};

}  // namespace muser
