// Q4_K: 256 values in 144 bytes.
//   0-15 head (format_k_head.h)   16-143 qs
//   sub-block s (values 32s .. 32s+31) reads nibble (s & 1) of qs[32 * (s / 2) + 0..31]
#pragma once
#include "format_k_head.h"

namespace muser {

template <>
struct Format<ggml::Q4_K> : ByteLevels<Format<ggml::Q4_K>> {
  enum { block_values = 256, block_bytes = 144, affine_values = 32, level_bits = 4, zero = 0, offsets = 1, contiguous_32 = 1 };
  struct field {
    enum { head = 0, qs = 16 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    bytes_at<N, N>(block + field::qs + k_pair_bytes * (s / 2) + j % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
    return k_scale_min(block + field::head, s);
  }
};

}  // namespace muser
