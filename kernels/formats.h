// Block decoders, one per GGUF format, keyed by ggml's type number.
//
// Every format is affine over runs of 16 values: Format<T>::levels<N>(row, i, lv) writes the
// levels of row values i .. i+N-1 into lv[0..N-1] and returns their Affine {scale, offset}, so
// that value k = scale * lv[k] - offset (levels are small integers as exact floats; the float
// formats return their values with scale 1, offset 0). decode<F, N> applies it: the gather's
// float32 values. The LM head instead sums x * lv and applies scale and offset once per run.
// N is 1, 2, 4, 8 or 16 and i % N == 0, so the N values never straddle a block, a sub-block
// of 16 values, or a run of same-nibble values (every quantized layout runs in multiples of 16).
// A quantized format's affine_values (16 or 32) is the length of its runs of one scale and offset.
// Arithmetic follows ggml (and gguf-py): scale and offset are ggml's per-run factors, each
// product is exact in float32 (Q6_K's rounds once, as in ggml), so decode is bit-identical to
// ggml's float32 dequantization whatever the order or FMA contraction.
// Needs from the prelude: MUSER_FN, MUSER_LOCAL, muser_f16_bits_to_float, muser_f32_bits_to_float,
// muser_mantissa_byte, muser_load_words, muser_load_words_at2, muser_load_u16.
#pragma once

namespace muser {

// ---- fields: little-endian loads from a byte pointer (any address space). The loads are as wide
// as the field's alignment allows: the table starts 16-byte aligned and every field below states
// the alignment its block layout gives it.

// Bytes p[0 .. N-1] (N = 1, 2, 4, 8 or a multiple of 16) as max(N / 4, 1) little-endian words; p is
// aligned to ALIGN bytes (a power of 2). The widest loads are 16 bytes.
template <int N, int ALIGN, typename P>
MUSER_FN void bytes_at(P p, MUSER_LOCAL uint32_t* w) {
  if (ALIGN >= 16 && N >= 16) {
    for (int k = 0; k < N / 4; k += 4) muser_load_words<4>(p + 4 * k, w + k);
  } else if (ALIGN >= 8 && N >= 8) {
    for (int k = 0; k < N / 4; k += 2) muser_load_words<2>(p + 4 * k, w + k);
  } else if (ALIGN >= 4 && N >= 4) {
    for (int k = 0; k < N / 4; ++k) muser_load_words<1>(p + 4 * k, w + k);
  } else if (ALIGN >= 2 && N >= 4) {
    muser_load_words_at2<N / 4>(p, w);
  } else if (ALIGN >= 2 && N >= 2) {
    for (int k = 0; k < (N + 3) / 4; ++k) w[k] = 0;
    for (int k = 0; k < N / 2; ++k) w[k / 2] |= muser_load_u16(p + 2 * k) << (16 * (k % 2));
  } else {
    for (int k = 0; k < (N + 3) / 4; ++k) w[k] = 0;
    for (int k = 0; k < N; ++k) w[k / 4] |= uint32_t(p[k]) << (8 * (k % 4));
  }
}

// A 2-byte-aligned float16 / bfloat16 (the top half of a float32: exact) as float32.
template <typename P>
MUSER_FN float f16_at(P p) {
  return muser_f16_bits_to_float(uint16_t(muser_load_u16(p)));
}

MUSER_FN float bf16_bits_to_float(uint32_t bits) {
  return muser_f32_bits_to_float(bits << 16);
}

// float(q) - zero for 0 <= q < 2^23, exact: q in the mantissa of 2^23, no int-to-float conversion.
MUSER_FN float level(uint32_t q, float zero) {
  return muser_f32_bits_to_float(0x4B000000u | q) - (8388608.0f + zero);
}

// level(byte k of w, zero): one byte move (the prelude's muser_mantissa_byte: a byte permute on
// CUDA) and one subtraction.
MUSER_FN float byte_level(uint32_t w, int k, float zero) {
  return muser_f32_bits_to_float(muser_mantissa_byte(w, k)) - (8388608.0f + zero);
}

// lv[k] = byte_level(byte k of bytes_at's words w, zero) for k < N. The quantized formats first
// assemble each value's level in its own byte, four values per word op.
template <int N>
MUSER_FN void byte_levels(MUSER_LOCAL const uint32_t* w, float zero, MUSER_LOCAL float* lv) {
  for (int k = 0; k < N; ++k) {
    lv[k] = byte_level(w[k / 4], k % 4, zero);
  }
}

struct Affine {
  float scale, offset;  // value = scale * level - offset
};

template <int GGML_TYPE>
struct Format;

// A quantized format F gives each value's level as a byte, level = byte - F::zero with the byte
// below 2^F::level_bits: F::level_bytes<N>(row, i, w) writes bytes of values i .. i+N-1 into
// words w[0 .. (N+3)/4 - 1] (value k in byte k % 4 of w[k / 4]) and returns their Affine.
// levels<N> follows from it (each byte's level by byte_levels); so do the matrix unit's
// 16-bit levels (kernels/mma.h).
template <typename F>
struct ByteLevels {
  template <int N, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t w[(N + 3) / 4];
    const Affine a = F::template level_bytes<N>(row, i, w);
    byte_levels<N>(w, float(F::zero), lv);
    return a;
  }
};

template <typename F, int N, typename P>
MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
  float lv[N];
  const Affine a = F::template levels<N>(row, i, lv);
  for (int k = 0; k < N; ++k) {
    v[k] = a.scale * lv[k] - a.offset;
  }
}

// F32: one little-endian float32 per value; values i .. i+N-1 are 4N-byte aligned.
template <>
struct Format<0> {
  enum { block_values = 1, block_bytes = 4 };
  template <int N, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t w[N];
    bytes_at<4 * N, 4 * N>(row + 4 * i, w);
    for (int k = 0; k < N; ++k) {
      lv[k] = muser_f32_bits_to_float(w[k]);
    }
    return Affine{1.0f, 0.0f};
  }
};

// F16 and BF16: one little-endian 16-bit float per value; values i .. i+N-1 are 2N-byte aligned.
template <int N, typename P>
MUSER_FN void halves_at(P row, uint32_t i, MUSER_LOCAL uint32_t* bits) {
  uint32_t w[(N + 1) / 2];
  bytes_at<2 * N, 2 * N>(row + 2 * i, w);
  for (int k = 0; k < N; ++k) {
    bits[k] = (w[k / 2] >> (16 * (k % 2))) & 0xFFFFu;
  }
}

template <>
struct Format<1> {
  enum { block_values = 1, block_bytes = 2 };
  template <int N, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t bits[N];
    halves_at<N>(row, i, bits);
    for (int k = 0; k < N; ++k) {
      lv[k] = muser_f16_bits_to_float(uint16_t(bits[k]));
    }
    return Affine{1.0f, 0.0f};
  }
};

template <>
struct Format<30> {
  enum { block_values = 1, block_bytes = 2 };
  template <int N, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t bits[N];
    halves_at<N>(row, i, bits);
    for (int k = 0; k < N; ++k) {
      lv[k] = bf16_bits_to_float(bits[k]);
    }
    return Affine{1.0f, 0.0f};
  }
};

// Q4_0: 32 values in 18 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-17 qs: value j (j < 16) is the low nibble of qs[j], value 16 + j the high one
//   value = d * (q - 8)
template <>
struct Format<2> : ByteLevels<Format<2>> {
  enum { block_values = 32, block_bytes = 18, affine_values = 32, level_bits = 4, zero = 8 };
  template <int N, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / 32) * 18;
    uint32_t j = i % 32, shift = (j / 16) * 4;
    bytes_at<N, 2>(block + 2 + j % 16, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
    return Affine{f16_at(block), 0.0f};
  }
};

// Q8_0: 32 values in 34 bytes (blocks 2-byte aligned).
//   0-1 d (f16)   2-33 qs (int8; byte ^ 0x80 = q + 128)   value = q * d
template <>
struct Format<8> : ByteLevels<Format<8>> {
  enum { block_values = 32, block_bytes = 34, affine_values = 32, level_bits = 8, zero = 128 };
  template <int N, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / 32) * 34;
    bytes_at<N, 2>(block + 2 + i % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] ^= 0x80808080u;
    }
    return Affine{f16_at(block), 0.0f};
  }
};

// Q4_K and Q5_K share their 16-byte head (blocks 16-byte aligned, one 16-byte load):
//   0-1 d (f16), 2-3 dmin (f16), 4-15 eight 6-bit scales and eight 6-bit mins, one pair per
//   sub-block s of 32 values; value = (d * scale[s]) * q - dmin * min[s].
// Scale/min packing, byte k of the 12 (x: bits 0-5 of entry j; X: bits 4-5 of entry j+4):
//   k = 0-3   XXxxxxxx   scale j = k
//   k = 4-7   XXxxxxxx   min   j = k - 4
//   k = 8-11  mmmmssss   low 4 bits of min j+4 (m) and scale j+4 (s), j = k - 8
template <typename P>
MUSER_FN Affine k_scale_min(P block, uint32_t s) {
  uint32_t head[4];  // bytes 0-3, 4-7 (scales 0-3), 8-11 (mins 0-3), 12-15 (low bits of entries 4-7)
  bytes_at<16, 16>(block, head);
  // The scales and mins of sub-blocks 4h .. 4h + 3 (h = s / 4), one per byte: for h = 0 bits 0-3
  // and 4-5 both come from bytes 4-7 (8-11), for h = 1 from 12-15 and the top bits of 4-7 (8-11).
  // Written without a branch on h, so that sub-blocks 2k and 2k + 1 visibly share it all.
  const uint32_t h = s / 4;
  const uint32_t sc = ((h ? head[3] : head[1]) & 0x0F0F0F0Fu) | ((head[1] >> (2 * h)) & 0x30303030u);
  const uint32_t m = (((h ? head[3] : head[2]) >> (4 * h)) & 0x0F0F0F0Fu) | ((head[2] >> (2 * h)) & 0x30303030u);
  return Affine{muser_f16_bits_to_float(uint16_t(head[0] & 0xFFFFu)) * byte_level(sc, s % 4, 0.0f),
                muser_f16_bits_to_float(uint16_t(head[0] >> 16)) * byte_level(m, s % 4, 0.0f)};
}

// Q4_K: 256 values in 144 bytes.
//   0-15 head (above)   16-143 qs
//   sub-block s (values 32s .. 32s+31) reads nibble (s & 1) of qs[32 * (s / 2) + 0..31]
template <>
struct Format<12> : ByteLevels<Format<12>> {
  enum { block_values = 256, block_bytes = 144, affine_values = 32, level_bits = 4, zero = 0 };
  template <int N, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / 256) * 144;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    bytes_at<N, N>(block + 16 + 32 * (s / 2) + j % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
    }
    return k_scale_min(block, s);
  }
};

// Q5_K: 256 values in 176 bytes.
//   0-15 head (above)   16-47 qh   48-175 qs
//   level of value 32s + l (l = 0..31), 5 bits:
//     q = h llll   h: bit s of qh[l]   llll: nibble (s & 1) of qs[32 * (s / 2) + l] (as Q4_K)
template <>
struct Format<13> : ByteLevels<Format<13>> {
  enum { block_values = 256, block_bytes = 176, affine_values = 32, level_bits = 5, zero = 0 };
  template <int N, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / 256) * 176;
    uint32_t j = i % 256, s = j / 32, shift = (s & 1) * 4;
    uint32_t qh[(N + 3) / 4];
    bytes_at<N, N>(block + 16 + j % 32, qh);
    bytes_at<N, N>(block + 48 + 32 * (s / 2) + j % 32, w);
    for (int k = 0; k < (N + 3) / 4; ++k) {  // per byte: bit s of qh, nibble (s & 1) of qs
      w[k] = ((w[k] >> shift) & 0x0F0F0F0Fu) | (((qh[k] >> s) & 0x01010101u) << 4);
    }
    return k_scale_min(block, s);
  }
};

// Q6_K: 256 values in 210 bytes (blocks 2-byte aligned); d comes last.
//   0-127 ql   128-191 qh   192-207 sixteen int8 scales (one per 16 values)   208-209 d (f16)
//   level of value 128h + r (h = 0, 1; r = 0..127), 6 bits:
//     q = hh llll   hh: bits 2 * (r / 32) .. +1 of qh[32h + r % 32]
//                   llll: nibble (r / 64) of ql[64h + r % 64]
//   value = (d * scale[(128h + r) / 16]) * (q - 32)
template <>
struct Format<14> : ByteLevels<Format<14>> {
  enum { block_values = 256, block_bytes = 210, affine_values = 16, level_bits = 6, zero = 32 };
  template <int N, typename P>
  static MUSER_FN Affine level_bytes(P row, uint32_t i, MUSER_LOCAL uint32_t* w) {
    P block = row + (i / 256) * 210;
    uint32_t j = i % 256, h = j / 128, r = j % 128;
    uint32_t ql_shift = (r / 64) * 4, qh_shift = (r / 32) * 2;
    uint32_t qh[(N + 3) / 4];
    bytes_at<N, 2>(block + 64 * h + r % 64, w);
    bytes_at<N, 2>(block + 128 + 32 * h + r % 32, qh);
    for (int k = 0; k < (N + 3) / 4; ++k) {  // per byte: bits qh_shift, +1 of qh, nibble of ql
      w[k] = ((w[k] >> ql_shift) & 0x0F0F0F0Fu) | (((qh[k] >> qh_shift) & 0x03030303u) << 4);
    }
    return Affine{f16_at(block + 208) * level(uint32_t(block[192 + j / 16]) ^ 0x80u, 128.0f), 0.0f};
  }
};

}  // namespace muser
