// TQ1_0: 256 ternary values in 54 bytes (blocks 2-byte aligned), five trits per byte.
//   0-47 qs   48-51 qh   52-53 d (f16)
//   A byte b holds trits t_0 .. t_4 as b = ceil(256 * (81 t_0 + 27 t_1 + 9 t_2 + 3 t_3 + t_4) / 243)
//   (qh's bytes four of them); trit k is ((b * 3^k mod 256) * 3) >> 8, bits 8-9 of the product.
//   value v:   0 .. 159  trit v / 32 of qs[v % 32]
//            160 .. 239  trit (v - 160) / 16 of qs[32 + (v - 160) % 16]
//            240 .. 255  trit (v - 240) / 4 of qh[(v - 240) % 4]
//   value = d * (trit - 1)
#pragma once
#include "formats.h"

namespace muser {

// 3^k for k <= 4: 1, 3, 9, 27, 81.
MUSER_FN uint32_t pow3(uint32_t k) { return k < 4 ? (0x1B090301u >> (8 * k)) & 255u : 81u; }

// The trit of each byte of w that power = 3^k picks (trit k), as bytes (0, 1 or 2). Two bytes at a
// time in 16-bit lanes: b * 3^k (at most 255 * 81) and its low byte times 3 (at most 765) stay
// inside a lane, the trit in the lane's high byte (the prelude's muser_odd_bytes and
// muser_lane_high_bytes: byte permutes on CUDA).
MUSER_FN uint32_t trits(uint32_t w, uint32_t power) {
  const uint32_t even = (((w & 0x00FF00FFu) * power) & 0x00FF00FFu) * 3u;
  const uint32_t odd = ((muser_odd_bytes(w) * power) & 0x00FF00FFu) * 3u;
  return muser_lane_high_bytes(even, odd);
}

template <>
struct Format<ggml::TQ1_0> : ByteLevels<Format<ggml::TQ1_0>> {
  enum { block_values = 256, block_bytes = 54, affine_values = 32, level_bits = 2, zero = 1 };
  enum { half_scale = 1 };  // value = float16 scale * level (formats.h)
  enum { step_offsets = 1 };  // its one-row head measured faster with them (formats.h)
  enum { qs_at = 0, qh_at = 48, d_at = 52 };  // field offsets
  enum { wide_values = 160, narrow_at = 32, qh_values = 240 };  // the three layouts
  // One load and one trit extraction for every value range, the ranges picked by selects (a lane
  // of a head decodes any range, and a branch on it would split the warp): the N bytes from qs
  // (trit t of each), or from qh's bytes and the N - 4 before them (word c: trit t + c of qh).
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    enum { QH_WORD = N >= 4 ? N / 4 - 1 : 0, QH_BEFORE = N >= 4 ? N - 4 : 0 };
    P block = row + (i / block_values) * block_bytes;
    const uint32_t j = i % block_values;
    const bool wide = j < wide_values, in_qh = j >= qh_values;
    const uint32_t r = wide ? j : j - wide_values, h = j - qh_values;
    const uint32_t at = in_qh ? qh_at + h % 4 - QH_BEFORE : qs_at + (wide ? r % 32 : narrow_at + r % 16);
    const uint32_t t = in_qh ? h / 4 : wide ? r / 32 : r / 16;
    bytes_at<N, 2, UNIFORM>(block + at, w);
    const uint32_t qh = w[QH_WORD], power = pow3(t);  // word k of qh's: trit t + k, 3^t 3^k
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = trits(in_qh ? qh : w[k], in_qh ? power * pow3(k) : power);
    }
    return Affine{f16_at(block + d_at), 0.0f};
  }
};

}  // namespace muser
