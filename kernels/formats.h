// Block decoders, one per GGUF format, keyed by ggml's type number.
//
// Format<T>::decode<N>(row, i, v) writes row values i .. i+N-1 as float32 into v[0..N-1].
// N is 1, 2, 4 or 8 and i % N == 0, so the N values never straddle a block, a sub-block of
// 16 values, or a run of same-nibble values (every quantized layout runs in multiples of 8).
// Arithmetic follows ggml (and gguf-py): each product is exact in float32, so the result is
// bit-identical to ggml's float32 dequantization whatever the order or FMA contraction.
// Needs from the prelude: MUSER_FN, MUSER_LOCAL, muser_f16_bits_to_float, muser_f32_bits_to_float.
#pragma once

namespace muser {

// ---- fields: little-endian reads from a byte pointer (any address space)

template <typename P>
MUSER_FN uint32_t u16_at(P p) {
  return uint32_t(p[0]) | (uint32_t(p[1]) << 8);
}

template <typename P>
MUSER_FN uint32_t u32_at(P p) {
  return u16_at(p) | (u16_at(p + 2) << 16);
}

template <typename P>
MUSER_FN float f16_at(P p) {
  return muser_f16_bits_to_float(uint16_t(u16_at(p)));
}

// bfloat16 is the top half of a float32: exact.
template <typename P>
MUSER_FN float bf16_at(P p) {
  return muser_f32_bits_to_float(u16_at(p) << 16);
}

template <typename P>
MUSER_FN float f32_at(P p) {
  return muser_f32_bits_to_float(u32_at(p));
}

// A byte (0..255) read as two's-complement int8 (-128..127).
MUSER_FN int32_t as_int8(uint32_t byte) {
  return int32_t(byte) - int32_t((byte & 0x80u) << 1);
}

template <int GGML_TYPE>
struct Format;

// F32: one little-endian float32 per value.
template <>
struct Format<0> {
  enum { block_values = 1, block_bytes = 4 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    for (int k = 0; k < N; ++k) {
      v[k] = f32_at(row + 4 * (i + k));
    }
  }
};

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

// BF16: one little-endian bfloat16 per value.
template <>
struct Format<30> {
  enum { block_values = 1, block_bytes = 2 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    for (int k = 0; k < N; ++k) {
      v[k] = bf16_at(row + 2 * (i + k));
    }
  }
};

// Q4_0: 32 values in 18 bytes.
//   0-1 d (f16)   2-17 qs: value j (j < 16) is the low nibble of qs[j], value 16 + j the high one
//   value = d * (q - 8)
template <>
struct Format<2> {
  enum { block_values = 32, block_bytes = 18 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 32) * 18;
    uint32_t j = i % 32, shift = (j / 16) * 4;
    float d = f16_at(block);
    P qs = block + 2 + j % 16;
    for (int k = 0; k < N; ++k) {
      v[k] = d * float(int32_t((qs[k] >> shift) & 15u) - 8);
    }
  }
};

// Q8_0: 32 values in 34 bytes.
//   0-1 d (f16)   2-33 qs (int8)   value = q * d
template <>
struct Format<8> {
  enum { block_values = 32, block_bytes = 34 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 32) * 34;
    float d = f16_at(block);
    P qs = block + 2 + i % 32;
    for (int k = 0; k < N; ++k) {
      v[k] = float(as_int8(qs[k])) * d;
    }
  }
};

// Q4_K and Q5_K share their head: 0-1 d (f16), 2-3 dmin (f16), 4-15 eight 6-bit scales and
// eight 6-bit mins, one pair per sub-block s of 32 values; value = (d * scale[s]) * q - dmin * min[s].
// Scale/min packing, byte k of the 12 (x: bits 0-5 of entry j; X: bits 4-5 of entry j+4):
//   k = 0-3   XXxxxxxx   scale j = k
//   k = 4-7   XXxxxxxx   min   j = k - 4
//   k = 8-11  mmmmssss   low 4 bits of min j+4 (m) and scale j+4 (s), j = k - 8
struct KScaleMin {
  float d_scale;   // d * scale[s]
  float dmin_min;  // dmin * min[s]
};

template <typename P>
MUSER_FN KScaleMin k_scale_min(P block, uint32_t s) {
  P packed = block + 4;
  uint32_t sc = s < 4 ? packed[s] & 63u : (packed[s + 4] & 15u) | ((packed[s - 4] >> 6) << 4);
  uint32_t m = s < 4 ? packed[s + 4] & 63u : (packed[s + 4] >> 4) | ((packed[s] >> 6) << 4);
  KScaleMin r = {f16_at(block) * float(sc), f16_at(block + 2) * float(m)};
  return r;
}

// Q4_K: 256 values in 144 bytes.
//   0-15 head (above)   16-143 qs
//   sub-block s (values 32s .. 32s+31) reads nibble (s & 1) of qs[32 * (s / 2) + 0..31]
template <>
struct Format<12> {
  enum { block_values = 256, block_bytes = 144 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 256) * 144;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    KScaleMin sm = k_scale_min(block, s);
    P qs = block + 16 + 32 * (s / 2) + j % 32;
    for (int k = 0; k < N; ++k) {
      v[k] = sm.d_scale * float((qs[k] >> shift) & 15u) - sm.dmin_min;
    }
  }
};

// Q5_K: 256 values in 176 bytes.
//   0-15 head (above)   16-47 qh   48-175 qs
//   level of value 32s + l (l = 0..31), 5 bits:
//     q = h llll   h: bit s of qh[l]   llll: nibble (s & 1) of qs[32 * (s / 2) + l] (as Q4_K)
template <>
struct Format<13> {
  enum { block_values = 256, block_bytes = 176 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 256) * 176;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    KScaleMin sm = k_scale_min(block, s);
    P qh = block + 16 + j % 32;
    P qs = block + 48 + 32 * (s / 2) + j % 32;
    for (int k = 0; k < N; ++k) {
      uint32_t q = ((qs[k] >> shift) & 15u) | (((qh[k] >> s) & 1u) << 4);
      v[k] = sm.d_scale * float(q) - sm.dmin_min;
    }
  }
};

// Q6_K: 256 values in 210 bytes; d comes last.
//   0-127 ql   128-191 qh   192-207 sixteen int8 scales (one per 16 values)   208-209 d (f16)
//   level of value 128h + r (h = 0, 1; r = 0..127), 6 bits:
//     q = hh llll   hh: bits 2 * (r / 32) .. +1 of qh[32h + r % 32]
//                   llll: nibble (r / 64) of ql[64h + r % 64]
//   value = (d * scale[(128h + r) / 16]) * (q - 32)
template <>
struct Format<14> {
  enum { block_values = 256, block_bytes = 210 };
  template <int N, typename P>
  static MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
    P block = row + (i / 256) * 210;
    uint32_t j = i % 256, h = j / 128, r = j % 128;
    uint32_t ql_shift = (r / 64) * 4, qh_shift = (r / 32) * 2;
    float scale = f16_at(block + 208) * float(as_int8(block[192 + j / 16]));
    P ql = block + 64 * h + r % 64;
    P qh = block + 128 + 32 * h + r % 32;
    for (int k = 0; k < N; ++k) {
      uint32_t q = ((ql[k] >> ql_shift) & 15u) | (((qh[k] >> qh_shift) & 3u) << 4);
      v[k] = scale * float(int32_t(q) - 32);
    }
  }
};

}  // namespace muser
