// IQ1_M: 256 values in 56 bytes (blocks 8-byte aligned). Group g: values 8g .. 8g + 7.
//   0-31 bits 0-7 of group g's iq1s_grid entry (byte g)   32-47 nibble g % 2 of byte 32 + g / 2:
//   bits 0-2 bits 8-10 of the entry, bit 3 the sign of the group's delta (+-1/8)   48-55 four
//   uint16 w0..w3: bits 3t .. 3t+2 of w(v / 64) the scale of values 16t .. 16t + 15 of those 64
//   (t = v / 16 % 4); their top nibbles, w0's lowest, are the bits of d (f16)
//   value = (d * (2 * scale + 1)) * (grid value + delta) = scale' * level as IQ1_S's, the delta
//   per group of 8 in the level.
#pragma once
#include "format_iq1_grid.h"

namespace muser {

template <>
struct Format<ggml::IQ1_M> : ByteLevels<Format<ggml::IQ1_M>> {
  enum { block_values = 256, block_bytes = 56, affine_values = 16, level_bits = 5, zero = 8 * iq1s_grid_largest + 1 };
  static MUSER_FN void share_grid() { MUSER_SHARE_GRID(iq1s_grid); }
  enum { decodes_runs = 1 };  // runs 32 apart share the scales' word and d (formats.h)
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    group_words<N>(block, j, w);
    uint32_t sc[2];  // w0 | w1 << 16, w2 | w3 << 16
    bytes_at<8, 8>(block + 48, sc);
    return affine(d_of(sc), sc, j);
  }
  template <int RUNS, typename P>
  static MUSER_FN void run_levels(P row, uint32_t i, MUSER_LOCAL uint32_t* w, MUSER_LOCAL Affine* a) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % 256;
    uint32_t sc[2];
    bytes_at<8, 8>(block + 48, sc);
    const float d = d_of(sc);
    for (int q = 0; q < RUNS; ++q) {
      group_words<16>(block, j + 32 * q, w + 4 * q);
      a[q] = affine(d, sc, j + 32 * q);
    }
  }
  // words c of the level bytes of values j .. j + N - 1 (level_bytes<N>'s w): their groups' entry
  // bytes and high nibbles each one load (N / 8 bytes from byte j / 8, N / 16 from 32 + j / 16)
  template <int N, typename P>
  static MUSER_FN void group_words(P block, uint32_t j, MUSER_LOCAL uint32_t* w) {
    enum { LOW = N >= 8 ? N / 8 : 1, HIGH = N >= 16 ? N / 16 : 1 };
    uint32_t low[1], high[1];
    bytes_at<LOW, LOW>(block + j / 8, low);
    bytes_at<HIGH, HIGH>(block + 32 + j / 16, high);
    for (int c = 0; c < (N + 3) / 4; ++c) {
      const uint32_t g = group_of<N>(j, c) - j / 8, k = in_group<N>(j, c);  // g: of the loaded groups
      const uint32_t h = high[0] >> (4 * (g + j / 8 % 2));  // bits 0-2: entry bits 8-10; bit 3: minus
      const uint32_t entry = ((low[0] >> (8 * g)) & 255u) | (h & 7u) << 8;
      w[c] = delta_word<N>(entry, k, h & 8u);
    }
  }
  // d from the top nibbles of the scales' words sc
  static MUSER_FN float d_of(MUSER_LOCAL const uint32_t* sc) {
    const uint32_t d = ((sc[0] >> 12) & 0x000Fu) | ((sc[0] >> 24) & 0x00F0u) | ((sc[1] >> 4) & 0x0F00u) | ((sc[1] >> 16) & 0xF000u);
    return muser_f16_bits_to_float(uint16_t(d));
  }
  // the Affine of the 16 values from j
  static MUSER_FN Affine affine(float d, MUSER_LOCAL const uint32_t* sc, uint32_t j) {
    const uint32_t scale = ((j < 128 ? sc[0] : sc[1]) >> (16 * (j / 64 % 2) + 3 * (j / 16 % 4))) & 7u;
    return Affine{d * level(2 * scale + 1, 0.0f) * 0.125f, 0.0f};
  }
};

}  // namespace muser
