// IQ1_S: 256 values in 50 bytes (blocks 2-byte aligned). Group g: values 8g .. 8g + 7.
//   0-1 d (f16)   2-33 bits 0-7 of group g's iq1s_grid entry (byte 2 + g)   34-49 a uint16 per
//   sub-block s of 32 values (at 34 + 2s): bits 3l .. 3l+2 bits 8-10 of its group l's entry, bits
//   12-14 the scale, bit 15 the sign of delta (+-1/8)
//   value = (d * (2 * scale + 1)) * (grid value + delta) (grid values -1, 0, 1) = scale' * level
//   with scale' = d * (2 * scale + 1) / 8 and level = 8 * grid value +- 1: both factors exact, so
//   the one product rounds as ggml's does.
#pragma once
#include "format_iq1_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ1_S> : ByteLevels<Format<ggml::IQ1_S>> {
  // byte = level + zero = 8 * (grid value + 1) + 1 +- 1: the grid word's nibble shifted, | 2 for +delta
  enum { block_values = 256, block_bytes = 50, affine_values = 32, level_bits = 5, zero = 8 * iq1s_grid_largest + 1 };
  enum { run_pair = 16 };  // values j .. j + 31 share a sub-block's scale and fields: one decode (bytedot.h)
  enum { step_offsets = 1 };  // its one-row head measured faster with them (formats.h)
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq1s_grid); }
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256, qh = muser_load_u16(block + 34 + 2 * (j / 32));
    for (int c = 0; c < (N + 3) / 4; ++c) {
      const uint32_t g = group_of<N>(j, c), k = in_group<N>(j, c);
      const uint32_t entry = uint32_t(block[2 + g]) | ((qh >> (3 * (g % 4))) & 7u) << 8;
      w[c] = delta_word<N>(entry, k, qh & 0x8000u);
    }
    return Affine{f16_at(block) * level(2 * ((qh >> 12) & 7u) + 1, 0.0f) * 0.125f, 0.0f};
  }
};

}  // namespace muser
