// Q4_0: 32 values in 18 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-17 qs: value j (j < 16) is the low nibble of qs[j], value 16 + j the high one
//   value = d * (q - 8)
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::Q4_0> : ByteLevels<Format<ggml::Q4_0>> {
  enum { block_values = 32, block_bytes = 18, affine_values = 32, level_bits = 4, zero = 8 };
  struct field {
    enum { d = 0, qs = 2 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    uint32_t j = i % 32, shift = (j / 16) * 4;
    bytes_at<N, 2, UNIFORM>(block + field::qs + j % 16, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
    return Affine{f16_at(block + field::d), 0.0f};
  }
};

}  // namespace muser
