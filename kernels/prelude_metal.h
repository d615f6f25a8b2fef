// Metal dialect for the shared kernel source (the header of mx.fast.metal_kernel).
#include <metal_stdlib>
using namespace metal;

#define MUSER_FN inline
#define MUSER_LOCAL thread

inline float muser_f16_bits_to_float(uint16_t bits) { return float(as_type<half>(bits)); }
inline float muser_f32_bits_to_float(uint32_t bits) { return as_type<float>(bits); }

template <int N, typename T>
inline void muser_store(device T* dst, thread const float* v) {
  for (int k = 0; k < N; ++k) {
    dst[k] = static_cast<T>(v[k]);
  }
}

inline float muser_sum(float v) { return simd_sum(v); }
