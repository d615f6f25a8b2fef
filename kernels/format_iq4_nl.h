// IQ4_NL: 32 values in 18 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-17 qs   (format_half_nibbles.h: q = nibble of qs)
//   value = d * kvalues_iq4nl[q]   (format_value_tables.h)
#pragma once
#include "format_half_nibbles.h"
#include "format_value_tables.h"

namespace muser {

template <>
struct Format<ggml::IQ4_NL> : ByteLevels<Format<ggml::IQ4_NL>> {
  enum { block_values = 32, block_bytes = 18, affine_values = 32, level_bits = 8, zero = 128, run_pair = 16 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  enum { d_at = 0, qs_at = 2 };  // field offsets
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    nibble_levels<N, 16, 2, UNIFORM>(block + qs_at, i % block_values, iq4nl_values(), w);
    return Affine{f16_at(block + d_at), 0.0f};
  }
};

}  // namespace muser
