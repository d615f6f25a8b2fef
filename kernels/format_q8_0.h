// Q8_0: 32 values in 34 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-33 qs (int8; byte ^ 0x80 = q + 128)   value = q * d
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::Q8_0> : ByteLevels<Format<ggml::Q8_0>> {
  enum { block_values = 32, block_bytes = 34, affine_values = 32, level_bits = 8, zero = 128 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  struct field {
    enum { d = 0, qs = 2 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    bytes_at<N, 2, UNIFORM>(block + field::qs + i % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] ^= 0x80808080u;
    }
    return Affine{f16_at(block + field::d), 0.0f};
  }
};

}  // namespace muser
