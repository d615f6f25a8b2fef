// Metal dialect for the shared kernel source (the header of mx.fast.metal_kernel).
#include <metal_stdlib>
using namespace metal;

#define MUSER_FN inline
#define MUSER_LOCAL thread
// A read-only table at program scope (the IQ grids, kernels/iq*_grid.h).
#define MUSER_CONSTANT constant

inline float muser_f16_bits_to_float(uint16_t bits) { return float(as_type<half>(bits)); }
inline float muser_f32_bits_to_float(uint32_t bits) { return as_type<float>(bits); }
#include "prelude_shifts.h"
inline uint32_t muser_select_bytes(uint32_t lo, uint32_t hi, uint32_t sel) {
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t s = (sel >> (4 * k)) & 7u;
    r |= (((s < 4 ? lo : hi) >> (8 * (s & 3u))) & 255u) << (8 * k);
  }
  return r;
}

// The table's bytes from the words the gather is given (backends/gather.py, table_words).
template <typename T>
inline const device uint8_t* muser_bytes(const device T* p) { return reinterpret_cast<const device uint8_t*>(p); }

// W = 1, 2 or 4 little-endian words from p (the table, in device memory), aligned to 4W bytes.
template <int W>
struct muser_words;
template <>
struct muser_words<1> {
  template <typename P>
  static inline void load(P p, thread uint32_t* w) { w[0] = *(const device uint*)(p); }
};
template <>
struct muser_words<2> {
  template <typename P>
  static inline void load(P p, thread uint32_t* w) {
    uint2 v = *(const device uint2*)(p);
    w[0] = v.x, w[1] = v.y;
  }
};
template <>
struct muser_words<4> {
  template <typename P>
  static inline void load(P p, thread uint32_t* w) {
    uint4 v = *(const device uint4*)(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
};

template <int W, typename P>
inline void muser_load_words(P p, thread uint32_t* w) { muser_words<W>::load(p, w); }

template <typename P>
inline uint32_t muser_load_u16(P p) { return *(const device ushort*)(p); }

// W little-endian words from a 2-byte-aligned p, 2 bytes at a time (UNIFORM: formats.h; no branch here).
template <int W, bool UNIFORM, typename P>
inline void muser_load_words_at2(P p, thread uint32_t* w) {
  for (int k = 0; k < W; ++k) w[k] = muser_load_u16(p + 4 * k) | muser_load_u16(p + 4 * k + 2) << 16;
}

// W little-endian words from any p, a byte at a time.
template <int W, typename P>
inline void muser_load_words_at1(P p, thread uint32_t* w) {
  for (int k = 0; k < W; ++k) w[k] = p[4 * k] | p[4 * k + 1] << 8 | p[4 * k + 2] << 16 | uint32_t(p[4 * k + 3]) << 24;
}

template <int N, typename T>
inline void muser_store(device T* dst, thread const float* v) {
  for (int k = 0; k < N; ++k) {
    dst[k] = static_cast<T>(v[k]);
  }
}
