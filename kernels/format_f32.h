// F32: one little-endian float32 per value; values i .. i+N-1 are 4N-byte aligned.
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::F32> {
  enum { block_values = 1, block_bytes = 4, half_scale = 0 };
  static MUSER_FN void share_grid() {}
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t w[N];
    bytes_at<4 * N, 4 * N>(row + 4 * i, w);
    for (int k = 0; k < N; ++k) {
      lv[k] = muser_f32_bits_to_float(w[k]);
    }
    return Affine{1.0f, 0.0f};
  }
};

}  // namespace muser
