// IQ4_XS: 256 values in 136 bytes (blocks 8-byte aligned), eight sub-blocks of 32.
//   0-1 d (f16)   2-3 scales_h (little-endian uint16)   4-7 scales_l   8-135 qs
//   sub-block s (values 32s .. 32s+31): 6-bit scale = hh llll,
//     hh: bits 2s, 2s+1 of scales_h   llll: nibble (s & 1) of scales_l[s / 2]
//   and IQ4_NL's nibbles over qs[16s .. 16s+15] (format_half_nibbles.h)
//   value = (d * (scale - 32)) * kvalues_iq4nl[q]   (format_value_tables.h)
#pragma once
#include "format_half_nibbles.h"
#include "format_value_tables.h"

namespace muser {

template <>
struct Format<ggml::IQ4_XS> : ByteLevels<Format<ggml::IQ4_XS>> {
  enum { block_values = 256, block_bytes = 136, affine_values = 32, level_bits = 8, zero = 128, run_pair = 16 };
  enum { d_at = 0, scales_h_at = 2, scales_l_at = 4, qs_at = 8, sub_values = 32, sub_bytes = 16 };
  enum { step_offsets = 1 };  // its one-row head measured faster with them (formats.h)
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t s = i % block_values / sub_values;
    nibble_levels<N, sub_bytes, 8, UNIFORM>(block + qs_at + sub_bytes * s, i % sub_values, iq4nl_values(), w);
    const uint32_t low = (uint32_t(block[scales_l_at + s / 2]) >> (4 * (s & 1))) & 15u;
    const uint32_t high = (muser_load_u16(block + scales_h_at) >> (2 * s)) & 3u;
    return Affine{f16_at(block + d_at) * level(low | (high << 4), 32.0f), 0.0f};
  }
};

}  // namespace muser
