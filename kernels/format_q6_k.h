// Q6_K: 256 values in 210 bytes (blocks 2-byte aligned); d comes last.
//   0-127 ql   128-191 qh   192-207 sixteen int8 scales (one per 16 values)   208-209 d (f16)
//   level of value 128h + r (h = 0, 1; r = 0..127), 6 bits:
//     q = hh llll   hh: bits 2 * (r / 32) .. +1 of qh[32h + r % 32]
//                   llll: nibble (r / 64) of ql[64h + r % 64]
//   value = (d * scale[(128h + r) / 16]) * (q - 32)
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::Q6_K> : ByteLevels<Format<ggml::Q6_K>> {
  enum { block_values = 256, block_bytes = 210, affine_values = 16, level_bits = 6, zero = 32 };
  enum { word_rows = 0 };  // its one-row head measured slower through muser_row (formats.h)
  struct field {
    enum { ql = 0, qh = 128, scales = 192, d = 208 };  // byte offsets in a block
  };
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / block_values) * block_bytes;
    uint32_t j = i % 256, h = j / 128, r = j % 128;
    uint32_t ql_shift = (r / 64) * 4, qh_shift = (r / 32) * 2;
    uint32_t qh[(N + 3) / 4];
    bytes_at<N, 2, UNIFORM>(block + field::ql + 64 * h + r % 64, w);
    bytes_at<N, 2, UNIFORM>(block + field::qh + 32 * h + r % 32, qh);
    for (int k = 0; k < (N + 3) / 4; ++k) {  // per byte: bits qh_shift, +1 of qh, nibble of ql
      w[k] = ((w[k] >> ql_shift) & 0x0F0F0F0Fu) | (((qh[k] >> qh_shift) & 0x03030303u) << 4);
    }
    return Affine{f16_at(block + field::d) * level(uint32_t(block[field::scales + j / 16]) ^ 0x80u, 128.0f), 0.0f};
  }
};

}  // namespace muser
