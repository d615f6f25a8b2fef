// Block decoders, one per GGUF format, keyed by ggml's type number.
//
// Format<T>::decode<N>(row, i, v) writes row values i .. i+N-1 as float32 into v[0..N-1].
// N is 1, 2, 4 or 8 and i % N == 0, so the N values never straddle a block, a sub-block of
// 16 values, or a run of same-nibble values (every quantized layout runs in multiples of 8).
// Arithmetic follows ggml (and gguf-py): each product is exact in float32, so the result is
// bit-identical to ggml's float32 dequantization whatever the order or FMA contraction.
// Needs from the prelude: MUSER_FN, MUSER_LOCAL, muser_f16_bits_to_float.
#pragma once

namespace muser {

template <typename P>
MUSER_FN uint32_t u16_at(P p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8);
}

template <typename P>
MUSER_FN float f16_at(P p) {
  return muser_f16_bits_to_float(uint16_t(u16_at(p)));
}

template <int GGML_TYPE>
struct Format;

// F16: one little-endian half per value.
template <>
struct Format<1> {
  enum { block_values = 1, block_bytes = 2 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    for (int k = 0; k < N; ++k) {
      v[k] = f16_at(row + 2 * (i + k));
    }
  }
};

// Q4_K: 256 values in 144 bytes.
//   0-1 d (f16)   2-3 dmin (f16)   4-15 eight 6-bit scales + eight 6-bit mins   16-143 qs
//   sub-block s (values 32s .. 32s+31) reads nibble (s & 1) of qs[32 * (s / 2) + 0..31]
//   value = (d * scale[s]) * q - dmin * min[s]
// Scale/min packing, byte k of the 12 (x: bits 0-5 of entry j; X: bits 4-5 of entry j+4):
//   k = 0-3   XXxxxxxx   scale j = k
//   k = 4-7   XXxxxxxx   min   j = k - 4
//   k = 8-11  mmmmssss   low 4 bits of min j+4 (m) and scale j+4 (s), j = k - 8
template <>
struct Format<12> {
  enum { block_values = 256, block_bytes = 144 };

  template <typename P>
  static MUSER_FN uint32_t scale(P packed, uint32_t s) {
    return s < 4 ? packed[s] & 63u : (packed[s + 4] & 15u) | ((packed[s - 4] >> 6) << 4);
  }

  template <typename P>
  static MUSER_FN uint32_t min(P packed, uint32_t s) {
    return s < 4 ? packed[s + 4] & 63u : (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
  }

  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 256) * 144;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    float d_scale = f16_at(block) * float(scale(block + 4, s));
    float dmin_min = f16_at(block + 2) * float(min(block + 4, s));
    P qs = block + 16 + 32 * (s / 2) + j % 32;
    for (int k = 0; k < N; ++k) {
      v[k] = d_scale * float((qs[k] >> shift) & 15u) - dmin_min;
    }
  }
};

}  // namespace muser
