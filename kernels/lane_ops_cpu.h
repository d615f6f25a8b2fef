// The CPU dialect's per-lane operations for the LM heads, as lanes_cuda.h's, after prelude_cpu.h:
// what lanes_cpu.h (the tests' 32-thread warps) and lanes_cpu_serial.h (the extension's one-lane
// warps) share.
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
