// CPU dialect for the shared kernel source: plain C++17, so the tests can execute the exact device
// arithmetic with the system compiler and the extension (csrc/) runs it for real. half is _Float16
// (x86-64 GCC 12+ / Clang 15+, arm64). A warp is lanes_cpu.h's 32 threads (the tests) or
// lanes_cpu_serial.h's one lane (the extension).
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__SSSE3__)  // AVX2 implies it
#include <immintrin.h>
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
#endif

#include "bfloat16_cpu.h"

#define MUSER_FN inline
#define MUSER_LOCAL
// A read-only table at namespace scope (the IQ grids, kernels/iq*_grid.h).
#define MUSER_CONSTANT static const

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

#include "prelude_shifts.h"
// Byte k: byte (nibble k of sel) & 7 of hi:lo, as CUDA's prmt: one byte shuffle (SSSE3's pshufb,
// the selector's nibbles spread to bytes) or a shift of the 8 bytes per byte.
inline uint32_t muser_select_bytes(uint32_t lo, uint32_t hi, uint32_t sel) {
  const uint64_t bytes = uint64_t(hi) << 32 | lo;
#if defined(__SSSE3__)
  // nibbles 0 and 2 to bytes 0 and 2, 1 and 3 to 1 and 3 (the copies in between masked off)
  const uint32_t at = (((sel & 0x0707u) * 0x0101u) & 0x00070007u) | (((sel & 0x7070u) * 0x1010u) & 0x07000700u);
  const __m128i picked = _mm_shuffle_epi8(_mm_cvtsi64_si128(int64_t(bytes)), _mm_cvtsi32_si128(int(at)));
  return uint32_t(_mm_cvtsi128_si32(picked));
#else
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) r |= uint32_t(bytes >> (8 * ((sel >> (4 * k)) & 7u)) & 255u) << (8 * k);
  return r;
#endif
}

// W little-endian words from p (x86-64 and ARM hosts are little-endian).
template <int W>
inline void muser_load_words(const uint8_t* p, uint32_t* w) {
  std::memcpy(w, p, 4 * W);
}

template <int W, bool UNIFORM>
inline void muser_load_words_at2(const uint8_t* p, uint32_t* w) {
  muser_load_words<W>(p, w);
}

template <int W>
inline void muser_load_words_at1(const uint8_t* p, uint32_t* w) {
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

// float16 and bfloat16 out, 8 values per vector op on AVX2 (F16C): the same roundings as the
// scalar casts (to nearest even; bfloat16's NaN 0x7fc0 with the sign, as muser_bfloat16).
#if defined(__AVX2__) && defined(__F16C__)
template <int N>
inline void muser_store(_Float16* dst, const float* v) {
  if constexpr (N % 8 == 0) {
    for (int c = 0; c < N; c += 8) {
      const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(v + c), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), h);
    }
  } else {
    for (int k = 0; k < N; ++k) dst[k] = _Float16(v[k]);
  }
}

template <int N>
inline void muser_store(muser_bfloat16* dst, const float* v) {
  if constexpr (N % 8 == 0) {
    for (int c = 0; c < N; c += 8) {
      const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(v + c));
      const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
      const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
      const __m256i quiet = _mm256_or_si256(_mm256_set1_epi32(0x7fc0), _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)));
      const __m256i bits = _mm256_blendv_epi8(rounded, quiet, nan);
      const __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), packed);
    }
  } else {
    for (int k = 0; k < N; ++k) dst[k] = muser_bfloat16(v[k]);
  }
}
#endif

// format_f16.h's to_floats for N % 8 == 0, 8 values per conversion where the compiler targets F16C
// (x86-64-v3) or arm64's NEON (the compilers convert one value at a time): lv[k] = float16 value k
// of words w (value k in half k % 2 of w[k / 2]), the same exact values as muser_f16_bits_to_float's.
#if defined(__F16C__) || (defined(__ARM_NEON) && defined(__aarch64__))
#define MUSER_F16_FLOATS
template <int N>
inline void muser_f16_floats(const uint32_t* w, float* lv) {
  static_assert(N % 8 == 0, "whole vectors of 8 values");
  for (int c = 0; c < N; c += 8) {
#if defined(__F16C__)
    _mm256_storeu_ps(lv + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c / 2))));
#else
    const float16x8_t h = vreinterpretq_f16_u32(vld1q_u32(w + c / 2));
    vst1q_f32(lv + c, vcvt_f32_f16(vget_low_f16(h)));
    vst1q_f32(lv + c + 4, vcvt_high_f32_f16(h));
#endif
  }
}
#endif

// format_value_tables.h's table_lookup for N % 16 == 0, 16 bytes per shuffle where the compiler
// targets SSSE3 (AVX2 implies it) or arm64's NEON (the extension's builds; the tests' harness builds
// for the baseline and takes the shared per-byte lookup): byte k of w becomes byte (byte k of w) of
// the table lo | hi << 64, ggml's pshufb / vqtbl1q of an int8 value table by the nibbles. Every
// byte of w is below 16.
#if defined(__SSSE3__) || (defined(__ARM_NEON) && defined(__aarch64__))
#define MUSER_TABLE_BYTES
#define MUSER_TABLE_WORDS 4
template <int WORDS>
inline void muser_table_bytes(uint64_t lo, uint64_t hi, uint32_t* w) {
  static_assert(WORDS % 4 == 0, "whole vectors of 16 bytes");
#if defined(__SSSE3__)
  const __m128i table = _mm_set_epi64x(int64_t(hi), int64_t(lo));
  for (int c = 0; c < WORDS; c += 4) {
    __m128i* p = reinterpret_cast<__m128i*>(w + c);
    _mm_storeu_si128(p, _mm_shuffle_epi8(table, _mm_loadu_si128(p)));
  }
#else
  const uint8x16_t table = vcombine_u8(vcreate_u8(lo), vcreate_u8(hi));
  for (int c = 0; c < WORDS; c += 4) {
    uint8_t* p = reinterpret_cast<uint8_t*>(w + c);
    vst1q_u8(p, vqtbl1q_u8(table, vld1q_u8(p)));
  }
#endif
}
#endif

// formats.h's byte_levels, 8 values per vector op where the compiler targets AVX2 or NEON (the
// extension's builds; the tests' harness builds for the baseline and takes the loop): lv[k] =
// byte k of w - zero, exact (a byte less a zero of 0-128).
#define MUSER_BYTE_LEVELS
template <int N>
inline void muser_byte_levels(const uint32_t* w, float zero, float* lv) {
#if defined(__AVX2__)
  if constexpr (N % 8 == 0) {
    for (int c = 0; c < N / 8; ++c) {
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 2 * c)));
      _mm256_storeu_ps(lv + 8 * c, _mm256_sub_ps(_mm256_cvtepi32_ps(bytes), _mm256_set1_ps(zero)));
    }
    return;
  }
#elif defined(__ARM_NEON) && defined(__aarch64__)
  if constexpr (N % 8 == 0) {
    for (int c = 0; c < N / 8; ++c) {
      const uint16x8_t half = vmovl_u8(vld1_u8(reinterpret_cast<const uint8_t*>(w + 2 * c)));
      const float32x4_t z = vdupq_n_f32(zero);
      vst1q_f32(lv + 8 * c, vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_low_u16(half))), z));
      vst1q_f32(lv + 8 * c + 4, vsubq_f32(vcvtq_f32_u32(vmovl_u16(vget_high_u16(half))), z));
    }
    return;
  }
#endif
  for (int k = 0; k < N; ++k) {
    lv[k] = float(int((w[k / 4] >> (8 * (k % 4))) & 255u)) - zero;
  }
}
