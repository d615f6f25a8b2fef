// CPU dialect for the shared kernel source: plain C++17, so the tests can execute the exact device
// arithmetic with the system compiler and the extension (csrc/) runs it for real. half is _Float16
// (x86-64 GCC 12+ / Clang 15+, arm64). A warp is lanes_cpu.h's 32 threads (the tests) or
// lanes_cpu_serial.h's one lane (the extension).
#pragma once
#include <cstdint>
#include <cstring>

#include "bfloat16_cpu.h"

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

template <int W, bool UNIFORM>
inline void muser_load_words_at2(const uint8_t* p, uint32_t* w) {
  muser_load_words<W>(p, w);
}

inline uint32_t muser_load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

template <int N, typename T>
inline void muser_store(T* dst, const float* v) {
  for (int k = 0; k < N; ++k) {
    dst[k] = static_cast<T>(v[k]);
  }
}
