// NVFP4: 64 values in 36 bytes (blocks 4-byte aligned), four sub-blocks of 16.
//   0-3 d (one UE4M3 scale per sub-block)   4-35 qs, 8 bytes per sub-block
//   sub-block s (values 16s .. 16s+15) reads qs[8s .. 8s+7] (format_half_nibbles.h, halves of 8):
//   value 16s + l is the low nibble of qs[8s + l] (l < 8), 16s + 8 + l the high one
//   value = d[s] * kvalues_mxfp4[q]   (format_value_tables.h: E2M1 doubled)
// UE4M3 byte x (bit 7 unused; ggml_ue4m3_to_fp32): exponent e = bits 3-6, mantissa m = bits 0-2;
// halved for the doubled values, d = (8 + m) * 2^(e - 11), or m * 2^-10 for e = 0; x = 0x7F
// (E4M3's NaN) is 0. Every d is finite, every product exact. Bits 0-6 shifted left by 7 are the
// float16 (1 + m/8) * 2^(e - 15), or its subnormal m * 2^-17 for e = 0: 2^7 times either is d,
// one conversion for the two cases.
#pragma once
#include "format_half_nibbles.h"
#include "format_value_tables.h"

namespace muser {

MUSER_FN float ue4m3_half(uint32_t x) {
  return x == 0x7Fu ? 0.0f : muser_f16_bits_to_float(uint16_t((x & 0x7Fu) << 7)) * 128.0f;
}

template <>
struct Format<ggml::NVFP4> : ByteLevels<Format<ggml::NVFP4>> {
  enum { block_values = 64, block_bytes = 36, affine_values = 16, level_bits = 5, zero = 12 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  enum { d_at = 0, qs_at = 4, sub_values = 16, sub_bytes = 8 };  // field offsets; a sub-block
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    const uint32_t s = i % block_values / sub_values;
    nibble_levels<N, sub_bytes, 4, UNIFORM>(block + qs_at + sub_bytes * s, i % sub_values, e2m1_values(), w);
    return Affine{ue4m3_half(block[d_at + s]), 0.0f};
  }
};

}  // namespace muser
