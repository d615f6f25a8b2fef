// BF16: one little-endian bfloat16 per value; values i .. i+N-1 are 2N-byte aligned.
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<30> {
  enum { block_values = 1, block_bytes = 2 };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t bits[N];
    halves_at<N>(row, i, bits);
    for (int k = 0; k < N; ++k) {
      lv[k] = bf16_bits_to_float(bits[k]);
    }
    return Affine{1.0f, 0.0f};
  }
};

}  // namespace muser
