// Q4_0: 32 values in 18 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-17 qs   (format_half_nibbles.h: q = nibble of qs)
//   value = d * (q - 8)
#pragma once
#include "format_half_nibbles.h"

namespace muser {

template <>
struct Format<ggml::Q4_0> : ByteLevels<Format<ggml::Q4_0>> {
  enum { block_values = 32, block_bytes = 18, affine_values = 32, level_bits = 4, zero = 8, run_pair = 16 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  struct field {
    enum { d = 0, qs = 2 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    half_nibbles<N, 16, 2, UNIFORM>(block + field::qs, i % block_values, w);
    return Affine{f16_at(block + field::d), 0.0f};
  }
};

}  // namespace muser
