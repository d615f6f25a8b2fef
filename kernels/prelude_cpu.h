// CPU dialect for the shared kernel source: plain C++17, so tests can execute the exact device
// arithmetic with the system compiler. half is _Float16 (x86-64 GCC 12+ / Clang 15+); a warp is
// 32 threads run by muser_cpu::run_warps.
#pragma once
#include <cstdint>
#include <cstring>

#include "bfloat16_cpu.h"
#include "cpu_runtime.h"

#define MUSER_FN inline
#define MUSER_LOCAL

inline float muser_f16_bits_to_float(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return float(h);
}

inline float muser_f32_bits_to_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint32_t muser_mantissa_byte(uint32_t w, int k) { return 0x4B000000u | ((w >> (8 * k)) & 255u); }

// W little-endian words from p (x86-64 and ARM hosts are little-endian).
template <int W>
inline void muser_load_words(const uint8_t* p, uint32_t* w) {
  std::memcpy(w, p, 4 * W);
}

inline uint32_t muser_load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <int N, typename X>
inline void muser_load_x(const X* p, float* v) {
  for (int k = 0; k < N; ++k) {
    v[k] = float(p[k]);
  }
}

template <int N, typename T>
inline void muser_store(T* dst, const float* v) {
  for (int k = 0; k < N; ++k) {
    dst[k] = static_cast<T>(v[k]);
  }
}

inline float muser_sum(float v) { return muser_cpu::warp_sum(v); }

// ---- the matrix unit (kernels/mma.h), emulated: muser_cpu::warp_mma. H is _Float16 or
// muser_bfloat16 (the type of x); muser_level_pairs as in prelude_cuda.h, by way of float.
inline uint16_t muser_bits(float v, const _Float16*) {
  _Float16 h = _Float16(v);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
inline uint16_t muser_bits(float v, const muser_bfloat16*) { return muser_bfloat16(v).bits; }

inline float muser_from_bits(uint16_t bits, const _Float16*) { return muser_f16_bits_to_float(bits); }
inline float muser_from_bits(uint16_t bits, const muser_bfloat16*) { return muser_f32_bits_to_float(uint32_t(bits) << 16); }

template <int BITS, int ZERO, typename H>
inline void muser_level_pairs(uint32_t w, const H* tag, uint32_t* pairs) {
  for (int k = 0; k < 2; ++k) {
    const float lo = float(int((w >> (16 * k)) & 255u) - ZERO), hi = float(int((w >> (16 * k + 8)) & 255u) - ZERO);
    pairs[k] = uint32_t(muser_bits(lo, tag)) | uint32_t(muser_bits(hi, tag)) << 16;
  }
}

template <typename H>
inline void muser_mma(const uint32_t* a, const uint32_t* b, float* d, const H* tag) {
  muser_cpu::warp_mma(a, b, d, [&](uint16_t bits) { return muser_from_bits(bits, tag); });
}
