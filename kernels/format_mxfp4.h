// MXFP4: 32 values in 17 bytes (blocks 1-byte aligned).
//   0 e (E8M0)   1-16 qs   (format_half_nibbles.h: q = nibble of qs)
//   value = d * kvalues_mxfp4[q]   (format_value_tables.h: E2M1 doubled)
//   d = 2^(e - 128), the E8M0 scale halved for the doubled values (ggml_e8m0_to_fp32_half): for
//   e >= 2 the float32 of exponent e - 1; 2^-128 and 2^-127 (e = 0, 1) are subnormal. Every d is
//   finite (e = 255 gives 2^127; ggml's loader refuses it), so each product is exact or, past
//   float32's range, infinite in ggml too.
#pragma once
#include "format_half_nibbles.h"
#include "format_value_tables.h"

namespace muser {

template <>
struct Format<ggml::MXFP4> : ByteLevels<Format<ggml::MXFP4>> {
  enum { block_values = 32, block_bytes = 17, affine_values = 32, level_bits = 5, zero = 12, run_pair = 16 };
  enum { e_at = 0, qs_at = 1 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    nibble_levels<N, 16, 1, UNIFORM>(block + qs_at, i % block_values, e2m1_values(), w);
    const uint32_t e = block[e_at];
    return Affine{muser_f32_bits_to_float(e < 2 ? 0x00200000u << e : (e - 1) << 23), 0.0f};
  }
};

}  // namespace muser
