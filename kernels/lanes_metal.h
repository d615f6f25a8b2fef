// The Metal dialect's operations for the LM head (matvec.h), after prelude_metal.h: loads of x
// and cross-lane sums.
#pragma once

template <int N, typename X>
inline void muser_load_x(const device X* p, thread float* v) {
  for (int k = 0; k < N; ++k) {
    v[k] = float(p[k]);
  }
}

enum { muser_warp_lanes = 32 };  // a simdgroup; kernels/matvec.h: warp_lanes
inline float muser_sum(float v) { return simd_sum(v); }
