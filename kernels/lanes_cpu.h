// The CPU dialect's operations for the LM heads, as lanes_cuda.h's, after prelude_cpu.h.
#pragma once

inline uint32_t muser_float_bits(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits;
}

// As lanes_cuda.h's (PRMT, dp4a), byte by byte.
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

template <int N, typename X>
inline void muser_load_x(const X* p, float* v) {
  for (int k = 0; k < N; ++k) {
    v[k] = float(p[k]);
  }
}

inline float muser_sum(float v) { return muser_cpu::warp_sum(v); }

// The matrix unit (kernels/mma.h), emulated: muser_cpu::warp_mma. H is _Float16 or
// muser_bfloat16 (the type of x); muser_level_pairs as in lanes_cuda.h, by way of float.
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
