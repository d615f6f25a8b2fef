// IQ3_XXS: 256 values in 98 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-65 the iq3xxs_grid entry of each 4 values (byte 2 + j / 4 for value j)
//   66-97 a uint32 per sub-block s of 32 values (at 66 + 4s): bits 7l .. 7l+6 the sign index
//   (ksigns) of its group l of 8 values, bits 28-31 the scale ls
//   value = (d * (0.5 + ls) * 0.5) * (+-grid value): d's 11 bits times ls's 5 times the grid's
//   6, every product exact in float32.
#pragma once
#include "format_iq3_points.h"
#include "iq3xxs_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ3_XXS> : ByteLevels<Format<ggml::IQ3_XXS>> {
  enum { block_values = 256, block_bytes = 98, affine_values = 32, level_bits = 7, zero = iq3xxs_grid_largest };
  enum { run_pair = 16 };  // values j .. j + 31 share a sub-block's signs and scale: one decode (bytedot.h)
  enum { grid_points = sizeof(iq3xxs_grid) / 4 };  // SignedPoints: 16 KB of shared memory in the heads that take them
  static MUSER_FN uint32_t grid_word(uint32_t e) { return iq3xxs_grid[e]; }
  // the signed points where the head takes them (formats.h: HeadForms), else the grid
  template <int ZERO = 0>
  static MUSER_FN void share_grid() {
#ifdef MUSER_SHARED_GRIDS
    if constexpr (HeadForms<ZERO>::signed_points) {
      SignedPoints<Format>::share();
    } else
#endif
    {
      MUSER_SHARE_GRID(iq3xxs_grid);
    }
  }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    uint32_t entries[(N + 15) / 16], aux[1];  // the entries' bytes; sub-block j / 32's sign indices and scale
    bytes_at<(N + 3) / 4, (N > 4 ? 2 : 1), UNIFORM>(block + 2 + j / 4, entries);
    bytes_at<4, 2, UNIFORM>(block + 66 + 4 * (j / 32), aux);
    for (int c = 0; c < (N + 3) / 4; ++c) {  // word c: grid entry j / 4 + c
      const uint32_t index = (aux[0] >> (7 * (group_of<N>(j, c) % 4))) & 127u;
      w[c] = point_word<N>((entries[c / 4] >> (8 * (c % 4))) & 255u, index, in_group<N>(j, c));
    }
    return Affine{f16_at(block) * level(aux[0] >> 28, -0.5f) * 0.5f, 0.0f};
  }
  // The level bytes of values k .. k + 3 of grid point `entry` (value k in byte 0) under ksigns
  // index `index`: one read of the signed points where the head takes them, else the grid's word
  // and the sign masks.
  template <int N>
  static MUSER_FN uint32_t point_word(uint32_t entry, uint32_t index, uint32_t k) {
#ifdef MUSER_SHARED_GRIDS
    if constexpr (HeadForms<N * 0>::signed_points) {
      return SignedPoints<Format>::template level_word<N>(entry, ksigns(index), k);
    } else
#endif
    {
      const uint32_t minus = SignMasks<true>::mask(index, k / 4);
      return signed_word<N>(MUSER_GRID(iq3xxs_grid)[entry], minus, k, zero);
    }
  }
};

}  // namespace muser
