// x for the byte dot products (bytedot.h): x [n, DIMS] -> runs [n, DIMS / 16, XRunRecord<PLANES>::words]
// uint32, one record per run of 16 values, one thread per run. Computed once per call, so the
// LM head's warps load each run's integers instead of converting it again for every table row.
//
// x goes in as integers, per run of 16 values: X = rint(x / unit), unit the power of two that
// brings the run's largest |x| to at most 2^BITS (BITS = 7 * PLANES: 14 for float16 and bfloat16
// x, PLANES 2; 21 for float32 x, PLANES 3). Each x is then off by at most unit / 2: 2^-(BITS + 1)
// of the power of two above the run's largest |x|, at most 2^-BITS of that |x| (float16's own
// rounding is 2^-11 of each value, float32's 2^-24). X's bytes are PLANES byte planes, the top one signed. A run holding a NaN or an infinity
// gets a NaN unit (its logits are NaN).
// A record, in 32-bit words (48 B for PLANES 2, 80 B for PLANES 3: whole 16-byte loads):
//   0 .. 4P-1  planes: word 4p + c holds byte p of X[4c + k] in byte k
//   4P .. 5P-1 plane sums: the sum of plane p's bytes (signed in the top plane), as int32
//   5P         unit (float32)   5P+1  sum(X) (float32)   then zeros to a multiple of 4 words
// Reads 16 values of x and writes XRunRecord<PLANES>::words * 4 bytes per run.
// Needs from lanes_<dialect>.h: muser_dot4, muser_byte_perm, muser_float_bits, muser_load_x.
#pragma once
#include "shapes.h"

namespace muser {

enum { x_run_values = 16 };

template <int PLANES>
struct XRunRecord {
  enum { planes = 0, plane_sums = 4 * PLANES, unit = 5 * PLANES, sum = 5 * PLANES + 1, words = (5 * PLANES + 5) / 4 * 4 };
};

// v[0..15] -> the run's record r[0 .. XRunRecord<PLANES>::words - 1].
template <int PLANES>
MUSER_FN void x_run(MUSER_LOCAL const float* v, MUSER_LOCAL uint32_t* r) {
  typedef XRunRecord<PLANES> R;
  enum { BITS = 7 * PLANES };
  uint32_t top = 0;  // the bits of the largest |v| (a NaN's are above every number's)
  for (int k = 0; k < x_run_values; ++k) {
    const uint32_t bits = muser_float_bits(v[k]) & 0x7FFFFFFFu;
    top = bits > top ? bits : top;
  }
  const uint32_t e = (top >> 23) > uint32_t(BITS) ? top >> 23 : uint32_t(BITS);  // |v| < 2^(e - 126)
  const float scale = muser_f32_bits_to_float((253u + BITS - e) << 23);          // 2^(BITS + 126 - e)
  r[R::unit] = e == 255u ? 0x7FC00000u : (e + 1u - BITS) << 23;
  uint32_t w[x_run_values];  // 0x4B400000 + X: X rounded to nearest in the mantissa of 1.5 * 2^23 (|X| <= 2^21)
  for (int k = 0; k < x_run_values; ++k) {
    w[k] = muser_float_bits(v[k] * scale + 12582912.0f);
  }
  MUSER_LOCAL uint32_t* planes = r + R::planes;
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
    int plane_sum = 0;
    for (int c = 0; c < 4; ++c) {
      plane_sum = p == PLANES - 1 ? muser_dot4<true>(0x01010101u, planes[4 * p + c], plane_sum)
                                  : muser_dot4<false>(0x01010101u, planes[4 * p + c], plane_sum);
    }
    r[R::plane_sums + p] = uint32_t(plane_sum);
    sum = sum * 256 + plane_sum;
  }
  r[R::sum] = muser_float_bits(float(sum));
  for (int k = R::sum + 1; k < R::words; ++k) {
    r[k] = 0;
  }
}

// The kernel: thread `run` of n_runs (n * DIMS / 16) writes runs[run].
template <int PLANES, typename XP, typename OutP>
MUSER_FN void x_runs(XP x, uint32_t n_runs, OutP runs, uint32_t run) {
  if (run >= n_runs) {
    return;
  }
  float v[x_run_values];
  muser_load_x<x_run_values>(x + uint64_t(run) * x_run_values, v);
  uint32_t r[XRunRecord<PLANES>::words];
  x_run<PLANES>(v, r);
  for (int k = 0; k < XRunRecord<PLANES>::words; ++k) {
    runs[uint64_t(run) * XRunRecord<PLANES>::words + k] = r[k];
  }
}

}  // namespace muser
