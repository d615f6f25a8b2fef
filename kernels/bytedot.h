// The LM head on byte dot products: x [n, DIMS] -> out [n, VOCAB] as matvec.h computes it, for
// the quantized formats, whose levels are bytes (formats.h: level_bytes), the products of levels
// and x summed four at a time in 32-bit integers by the prelude's muser_dot4 (CUDA's dp4a).
//
// x goes in as integers, per run of 16 values: X = rint(x / unit), unit the power of two that
// brings the run's largest |x| to at most 2^BITS (BITS = 7 * PLANES: 14 for float16 and bfloat16
// x, PLANES 2; 21 for float32 x, PLANES 3). Each x is then off by at most unit / 2, that is
// 2^-(BITS + 1) of the run's largest |x| (float16's own rounding is 2^-11 of each value, float32's
// 2^-24). X's bytes are PLANES byte planes, the top one signed, so sum((byte - zero) * X) over a
// run is exact, one muser_dot4 per 4 values and plane, and the run adds
//   unit * (scale * sum((byte - zero) * X) - offset * sum(X))
// to its logit (formats.h: value = scale * (byte - zero) - offset). A run of x holding a NaN or an
// infinity makes its logits NaN.
// The frame is matvec.h's stream_logits: one warp per VROWS vocab rows, grid-stride; ROWS rows of
// x per pass. ByteLanes: per step lane l takes RUNS runs of unit u (u = l, l + 32, ...): RUNS 2,
// values i and i + 32 with i = 64 (u / 2) + 16 (u % 2) (for Q4_K and Q5_K the same 16 bytes of qs
// hold both runs' levels); RUNS 1, values i = 16 u. It converts those runs of x once and reuses
// them for its VROWS table rows.
// Needs matvec.h (stream_logits) and from the prelude: muser_dot4, muser_byte_perm,
// muser_float_bits, muser_load_x, muser_sum, muser_store.
#pragma once

namespace muser {

enum { x_run_values = 16 };

struct XRun {
  float unit, sum;  // x = unit * X; sum = sum(X) over the run
};

// v[0..15] -> planes[p * 4 + c] (byte p of X[4c + k] in byte k), plane_sums[p] = the sum of
// plane p's bytes (signed in the top plane), and the run's unit and sum(X).
template <int PLANES>
MUSER_FN XRun x_run(MUSER_LOCAL const float* v, MUSER_LOCAL uint32_t* planes, MUSER_LOCAL int* plane_sums) {
  enum { BITS = 7 * PLANES };
  uint32_t top = 0;  // the bits of the largest |v| (a NaN's are above every number's)
  for (int k = 0; k < x_run_values; ++k) {
    const uint32_t bits = muser_float_bits(v[k]) & 0x7FFFFFFFu;
    top = bits > top ? bits : top;
  }
  const uint32_t e = (top >> 23) > uint32_t(BITS) ? top >> 23 : uint32_t(BITS);  // |v| < 2^(e - 126)
  const float scale = muser_f32_bits_to_float((253u + BITS - e) << 23);          // 2^(BITS + 126 - e)
  const float unit = e == 255u ? muser_f32_bits_to_float(0x7FC00000u) : muser_f32_bits_to_float((e + 1u - BITS) << 23);
  uint32_t w[x_run_values];  // 0x4B400000 + X: X rounded to nearest in the mantissa of 1.5 * 2^23 (|X| <= 2^21)
  for (int k = 0; k < x_run_values; ++k) {
    w[k] = muser_float_bits(v[k] * scale + 12582912.0f);
  }
  for (int c = 0; c < 4; ++c) {
    MUSER_LOCAL const uint32_t* q = w + 4 * c;
    const uint32_t low = muser_byte_perm(q[0], q[1], 0x5140u), high = muser_byte_perm(q[2], q[3], 0x5140u);
    planes[c] = muser_byte_perm(low, high, 0x5410u);      // byte 0 of q[0..3]
    planes[4 + c] = muser_byte_perm(low, high, 0x7632u);  // byte 1: X >> 8, signed when PLANES is 2
    if (PLANES == 3) {  // byte 2 is 0x40 + (X >> 16): less 0x40, sign-extended from 7 bits
      const uint32_t t = muser_byte_perm(muser_byte_perm(q[0], q[1], 0x0062u), muser_byte_perm(q[2], q[3], 0x0062u),
                                         0x5410u) ^ 0x40404040u;
      planes[8 + c] = t | ((t << 1) & 0x80808080u);
    }
  }
  int sum = 0;
  for (int p = PLANES - 1; p >= 0; --p) {
    plane_sums[p] = 0;
    for (int c = 0; c < 4; ++c) {
      plane_sums[p] = p == PLANES - 1 ? muser_dot4<true>(0x01010101u, planes[4 * p + c], plane_sums[p])
                                      : muser_dot4<false>(0x01010101u, planes[4 * p + c], plane_sums[p]);
    }
    sum = sum * 256 + plane_sums[p];
  }
  return XRun{unit, float(sum)};
}

// A run's term of the logit: levels = 16 level bytes (4 words) with their Affine, against one
// run of x from x_run.
template <int PLANES, int ZERO>
MUSER_FN float run_term(MUSER_LOCAL const uint32_t* levels, Affine a, MUSER_LOCAL const uint32_t* planes,
                        MUSER_LOCAL const int* plane_sums, XRun xr) {
  int s[PLANES];  // sum((byte - ZERO) * byte p of X), exact
  for (int p = 0; p < PLANES; ++p) {
    s[p] = -ZERO * plane_sums[p];
    for (int c = 0; c < 4; ++c) {
      s[p] = p == PLANES - 1 ? muser_dot4<true>(levels[c], planes[4 * p + c], s[p])
                             : muser_dot4<false>(levels[c], planes[4 * p + c], s[p]);
    }
  }
  const float dot = PLANES == 2 ? float(s[0] + 256 * s[1]) : float(s[PLANES - 1]) * 65536.0f + float(s[0] + 256 * s[1]);
  return xr.unit * (a.scale * dot - a.offset * xr.sum);
}

template <typename F, int DIMS, int ROWS, int VROWS, int RUNS, int PLANES>
struct ByteLanes {
  static_assert(DIMS % (x_run_values * 2 * RUNS) == 0, "whole units of RUNS runs");

  template <typename TableP, typename XP>
  static MUSER_FN void add(MUSER_LOCAL const TableP* rows, XP x, uint32_t m0, uint32_t live, uint32_t lane,
                           MUSER_LOCAL float (*acc)[ROWS]) {
    for (uint32_t u = lane; u < uint32_t(DIMS / (x_run_values * RUNS)); u += warp_lanes) {
      const uint32_t i = RUNS == 2 ? 64 * (u / 2) + 16 * (u % 2) : 16 * u;
      uint32_t planes[ROWS][RUNS][4 * PLANES];
      int plane_sums[ROWS][RUNS][PLANES];
      XRun xr[ROWS][RUNS];
      for (int m = 0; m < ROWS; ++m) {
        for (int r = 0; r < RUNS; ++r) {
          float xs[x_run_values];  // rows past n are zeros: their logits are never stored
          if (uint32_t(m) < live) {
            muser_load_x<x_run_values>(x + (m0 + m) * uint64_t(DIMS) + i + 32 * r, xs);
          } else {
            for (int k = 0; k < x_run_values; ++k) {
              xs[k] = 0.0f;
            }
          }
          xr[m][r] = x_run<PLANES>(xs, planes[m][r], plane_sums[m][r]);
        }
      }
      for (int v = 0; v < VROWS; ++v) {
        for (int r = 0; r < RUNS; ++r) {
          uint32_t levels[4];
          const Affine a = F::template level_bytes<x_run_values>(rows[v], i + 32 * r, levels);
          for (int m = 0; m < ROWS; ++m) {
            acc[v][m] += run_term<PLANES, F::zero>(levels, a, planes[m][r], plane_sums[m][r], xr[m][r]);
          }
        }
      }
    }
  }
};

template <typename F, int DIMS, int VOCAB, int ROWS, int VROWS, int RUNS, int PLANES, typename TableP, typename XP,
          typename OutP>
MUSER_FN void bytedot(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t thread_index, uint32_t thread_count) {
  stream_logits<F, DIMS, VOCAB, ROWS, VROWS, ByteLanes<F, DIMS, ROWS, VROWS, RUNS, PLANES>>(table, x, n_rows, out,
                                                                                           thread_index, thread_count);
}

}  // namespace muser
