// The CPU dialect's lanes for real execution (the extension, csrc/): a warp is one lane, so a CPU
// thread runs a whole warp's share of the LM head (kernels/matvec.h) and the cross-lane sum is
// the value itself; the compiler vectorizes each lane's runs of 16 values instead.
#pragma once
#include "lane_ops_cpu.h"

enum { muser_warp_lanes = 1 };  // kernels/matvec.h: warp_lanes

inline float muser_sum(float v) { return v; }

// matvec.h's dot product of a run: sum over k < N of a[k] * b[k], 8 products per vector op on AVX2,
// 4 on NEON (a different order of the float32 sums than the GPUs' one-lane loop).
#define MUSER_DOT
template <int N>
inline float muser_dot(const float* a, const float* b) {
#if defined(__AVX2__)
  if constexpr (N % 8 == 0) {
    __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(a), _mm256_loadu_ps(b));
    for (int k = 8; k < N; k += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
#elif defined(__ARM_NEON) && defined(__aarch64__)
  if constexpr (N % 4 == 0) {
    float32x4_t acc = vmulq_f32(vld1q_f32(a), vld1q_f32(b));
    for (int k = 4; k < N; k += 4) acc = vfmaq_f32(acc, vld1q_f32(a + k), vld1q_f32(b + k));
    return vaddvq_f32(acc);
  }
#endif
  float dot = 0.0f;
  for (int k = 0; k < N; ++k) {
    dot += a[k] * b[k];
  }
  return dot;
}
