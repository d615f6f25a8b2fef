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

inline uint32_t muser_float_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

// As prelude_cuda.h's (PRMT, dp4a), byte by byte.
inline uint32_t muser_byte_perm(uint32_t a, uint32_t b, uint32_t s) {
  const uint64_t bytes = uint64_t(b) << 32 | a;
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    r |= uint32_t(bytes >> (8 * ((s >> (4 * k)) & 7u)) & 255u) << (8 * k);
  }
  return r;
}

template <bool SIGNED>
inline int muser_dot4(uint32_t a, uint32_t b, int c) {
  uint32_t d = uint32_t(c);
  for (int k = 0; k < 4; ++k) {
    const uint32_t bk = (b >> (8 * k)) & 255u;
    d += ((a >> (8 * k)) & 255u) * (SIGNED ? uint32_t(int32_t(int8_t(uint8_t(bk)))) : bk);
  }
  return int(d);
}

inline uint32_t muser_mantissa_byte(uint32_t w, int k) { return 0x4B000000u | ((w >> (8 * k)) & 255u); }

// W little-endian words from p (x86-64 and ARM hosts are little-endian).
template <int W>
inline void muser_load_words(const uint8_t* p, uint32_t* w) {
  std::memcpy(w, p, 4 * W);
}

template <int W>
inline void muser_load_words_at2(const uint8_t* p, uint32_t* w) {
  muser_load_words<W>(p, w);
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
