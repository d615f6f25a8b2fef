// Q5_K: 256 values in 176 bytes.
//   0-15 head (format_k_head.h)   16-47 qh   48-175 qs
//   level of value 32s + l (l = 0..31), 5 bits:
//     q = h llll   h: bit s of qh[l]   llll: nibble (s & 1) of qs[32 * (s / 2) + l] (as Q4_K)
#pragma once
#include "format_k_head.h"

namespace muser {

template <>
struct Format<ggml::Q5_K> : ByteLevels<Format<ggml::Q5_K>> {
  enum { block_values = 256, block_bytes = 176, affine_values = 32, level_bits = 5, zero = 0, offsets = 1, contiguous_32 = 1 };
  struct field {
    enum { head = 0, qh = 16, qs = 48 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    uint32_t qh[(N + 3) / 4];
    bytes_at<N, N>(block + field::qh + j % 32, qh);
    bytes_at<N, N>(block + field::qs + k_pair_bytes * (s / 2) + j % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {  // per byte: bit s of qh, nibble (s & 1) of qs
      w[k] = ((w[k] >> shift) & 0x0F0F0F0Fu) | (((qh[k] >> s) & 0x01010101u) << 4);
    }
    return k_scale_min(block + field::head, s);
  }
};

}  // namespace muser
