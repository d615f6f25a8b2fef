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
  enum { block_values = 256, block_bytes = 110, affine_values = 16, level_bits = 3, zero = 4 };
  enum { hmask_at = 0, qs_at = 32, scales_at = 96, scales_high_at = 104, d_at = 108 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values, t = j / 16, bit = j / 32;
    uint32_t hmask[(N + 3) / 4];
    two_bits<N, 2, UNIFORM>(block + qs_at, j, w);
    bytes_at<N, 2, UNIFORM>(block + hmask_at + j % 32, hmask);
    for (int k = 0; k < (N + 3) / 4; ++k) {  // per byte: bit j / 32 of hmask above the two bits
      w[k] |= ((hmask[k] >> bit) & 0x01010101u) << 2;
    }
    const uint32_t low = (uint32_t(block[scales_at + t % 8]) >> (4 * (t / 8))) & 15u;
    const uint32_t high = (uint32_t(block[scales_high_at + t % 4]) >> (2 * (t / 4))) & 3u;
    return Affine{f16_at(block + d_at) * level(low | (high << 4), 32.0f), 0.0f};
  }
};

}  // namespace muser
