// What every block decoder shares: the Format contract, little-endian field loads, levels as exact
// floats. The decoders themselves are format_<name>.h, one per GGUF format, each a specialization
// Format<ggml::NAME> (ggml_types.h); a kernel's header holds only its table's (backends/source.py).
//
// Every format is affine over runs of 16 values: Format<T>::levels<N>(row, i, lv) writes the
// levels of row values i .. i+N-1 into lv[0..N-1] and returns their Affine {scale, offset}, so
// that value k = scale * lv[k] - offset (levels are small integers as exact floats; the float
// formats return their values with scale 1, offset 0). decode<F, N> applies it: the gather's
// float32 values. The LM head instead sums x * lv and applies scale and offset once per run.
// N is 1, 2, 4, 8 or 16 and i % N == 0, so the N values never straddle a block, a sub-block
// of 16 values, or a run of same-nibble values (every quantized layout runs in multiples of 16;
// the two that do not, NVFP4's halves of 8 and TQ1_0's last 16 values in runs of 4, assemble the
// N values' bytes from their runs inside level_bytes).
// A quantized format's affine_values (16 or 32) is the length of its runs of one scale and offset.
// UNIFORM (default false) says that every lane of a warp reads at the same 4-byte alignment (the
// gather's warps read within one block of a 256-value format), so a 2-byte-aligned load may branch
// on the alignment without splitting the warp (bytes_at).
// Arithmetic follows ggml (and gguf-py): scale and offset are ggml's per-run factors, each
// product is exact in float32 (Q6_K's rounds once, as in ggml; MXFP4's pass float32's range to
// Inf from exponent 253, as in ggml), so decode is bit-identical to ggml's float32 dequantization
// whatever the order or FMA contraction. Q4_1's and Q5_1's offset is -m: d * q - (-m) = d * q + m.
// Needs from the prelude: MUSER_FN, MUSER_LOCAL, muser_f16_bits_to_float, muser_f32_bits_to_float,
// muser_mantissa_byte, muser_odd_bytes, muser_lane_high_bytes (format_tq1_0.h), muser_load_words,
// muser_load_words_at2, muser_load_words_at1, muser_load_u16 (and, where it defines
// MUSER_BYTE_LEVELS, muser_byte_levels; format_value_tables.h: MUSER_TABLE_BYTES,
// muser_table_bytes, MUSER_TABLE_WORDS, MUSER_TABLE_NIBBLES, muser_table_nibbles; format_f16.h:
// MUSER_F16_FLOATS, muser_f16_floats; format_iq_grid.h and format_iq_signs.h: MUSER_CONSTANT, and
// with MUSER_SHARED_GRIDS muser_shared_words, muser_share_words, muser_fill_words).
#pragma once
#include "ggml_types.h"
#include "shapes.h"

namespace muser {

// ---- fields: little-endian loads from a byte pointer (any address space). The loads are as wide
// as the field's alignment allows: the table starts 16-byte aligned and every field states the
// alignment its block layout gives it.

// Bytes p[0 .. N-1] (N = 1, 2, 4, 8 or a multiple of 16) as max(N / 4, 1) little-endian words; p is
// aligned to ALIGN bytes (a power of 2). The widest loads are 16 bytes.
template <int N, int ALIGN, bool UNIFORM = false, typename P>
MUSER_FN void bytes_at(P p, MUSER_LOCAL uint32_t* w) {
  if (ALIGN >= 16 && N >= 16) {
    for (int k = 0; k < N / 4; k += 4) muser_load_words<4>(p + 4 * k, w + k);
  } else if (ALIGN >= 8 && N >= 8) {
    for (int k = 0; k < N / 4; k += 2) muser_load_words<2>(p + 4 * k, w + k);
  } else if (ALIGN >= 4 && N >= 4) {
    for (int k = 0; k < N / 4; ++k) muser_load_words<1>(p + 4 * k, w + k);
  } else if (ALIGN >= 2 && N >= 4) {
    muser_load_words_at2<N / 4, UNIFORM>(p, w);
  } else if (N >= 4) {
    muser_load_words_at1<N / 4>(p, w);
  } else if (ALIGN >= 2 && N >= 2) {
    for (int k = 0; k < (N + 3) / 4; ++k) w[k] = 0;
    for (int k = 0; k < N / 2; ++k) w[k / 2] |= muser_load_u16(p + 2 * k) << (16 * (k % 2));
  } else {
    for (int k = 0; k < (N + 3) / 4; ++k) w[k] = 0;
    for (int k = 0; k < N; ++k) w[k / 4] |= uint32_t(p[k]) << (8 * (k % 4));
  }
}

// A 2-byte-aligned float16 as float32.
template <typename P>
MUSER_FN float f16_at(P p) {
  return muser_f16_bits_to_float(uint16_t(muser_load_u16(p)));
}

// A bfloat16's bits (the top half of a float32: exact) as float32.
MUSER_FN float bf16_bits_to_float(uint32_t bits) {
  return muser_f32_bits_to_float(bits << 16);
}

// Bits 0-3 of four as bits 0, 8, 16 and 24 (a bit a byte): the multiply copies bit b to bits b,
// b + 7, b + 14 and b + 21, which never overlap, so no carry crosses them, and the mask keeps b + 7b.
MUSER_FN uint32_t bits_to_bytes(uint32_t four) {
  return ((four & 15u) * 0x00204081u) & 0x01010101u;
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
// assemble each value's level in its own byte, four values per word op. A dialect with vector
// byte-to-float conversions defines MUSER_BYTE_LEVELS and muser_byte_levels<N>, the same exact
// values (prelude_cpu.h: the CPU extension's AVX2 / NEON).
template <int N>
MUSER_FN void byte_levels(MUSER_LOCAL const uint32_t* w, float zero, MUSER_LOCAL float* lv) {
#ifdef MUSER_BYTE_LEVELS
  muser_byte_levels<N>(w, zero, lv);
#else
  for (int k = 0; k < N; ++k) {
    lv[k] = byte_level(w[k / 4], k % 4, zero);
  }
#endif
}

struct Affine {
  float scale, offset;  // value = scale * level - offset
};

template <int GGML_TYPE>  // a ggml::Type (ggml_types.h)
struct Format;

// A quantized format F gives each value's level as a byte, level = byte - F::zero with the byte
// below 2^F::level_bits: F::level_bytes<N>(row, i, w) writes bytes of values i .. i+N-1 into
// words w[0 .. (N+3)/4 - 1] (value k in byte k % 4 of w[k / 4]) and returns their Affine.
// levels<N> follows from it (each byte's level by byte_levels); so do the matrix unit's
// 16-bit levels (kernels/mma.h).
// run_pair: the distance between the two runs of 16 values a lane of kernels/bytedot.h decodes
// together, 32 (Q4_K's and Q5_K's qs bytes hold values i and i + 32), or 16 where runs j and
// j + 16 share their bytes and one scale, and level_bytes<32> decodes the two at once
// (format_half_nibbles.h's formats but NVFP4, whose runs j and j + 16 are sub-blocks of their own
// scale; IQ2_XXS, IQ3_XXS, IQ3_S and IQ1_S, whose 32-value sub-blocks
// hold one scale and the fields of both). decodes_runs: the format's run_levels<RUNS>(row, i, w,
// a) gives the level bytes of runs i + 32 q (q < RUNS) in w[4q .. 4q + 3] and their Affines in
// a[q], for paired runs that share fields nvcc would load twice, once per level_bytes
// (format_two_bits.h's formats, Q3_K, IQ1_M).
// contiguous_32: 1 where level_bytes<32> gives values i .. i + 31 (i a multiple of 32) under one
// Affine though run_pair is 32: Q4_K and Q5_K, whose 32-value sub-blocks are one nibble of 32
// bytes; the CPU's byte dot products decode 32 values at a time there, as for run_pair 16
// (kernels/bytedot_cpu.h: one scale and min a sub-block, not one a run).
// offsets: 1 where the heads add offset * sum(x) per run: where it may be nonzero (ggml's mins:
// Q4_1, Q5_1, Q2_K, Q4_K, Q5_K), and TQ2_0, whose heads measured faster with it ("Byte dot
// products"). Elsewhere the byte dot products and matrix units skip it, two float instructions
// per run that nvcc keeps (0 * x is not 0 for every float x), and the matrix units' loads of x's
// run sums, which the host then does not make (backends/head.py: run_offsets reads a decoder's
// "offsets = 1" from its header).
// word_rows: 1 where the byte dot products and the matrix units may read a row of whole words
// through the prelude's muser_row (table_rows.h: row_type), 0 for Q3_K, Q6_K, IQ2_S and IQ3_S, whose
// one-row heads measured slower with it ("Aligned loads").
// half_scale: 1 where level_bytes's Affine is a float16 number (a field of the block, or a value
// exact in float16) times the level, without offset (Q8_0, Q4_0, Q5_0, IQ4_NL, TQ1_0, TQ2_0,
// NVFP4): each value is the product of two float16 numbers, which float16 arithmetic rounds once,
// as the gather's float32 product (exact) rounded to float16 is (kernels/tile_mma.h: decode_h).
// step_offsets: 1 where a lane of kernels/bytedot.h hands the decoder its first step's value index
// and each step's byte offset from it rather than the step's value index, so that the index
// arithmetic is done once for all steps: TQ1_0, IQ1_S, IQ4_XS, whose one-row heads measured faster
// with it, where the other formats' measured slower ("Step offsets").
// share_grid(): what a kernel that streams many table rows (matvec.h, mma.h) does first, from
// every thread of its threadgroup: nothing, but for a grid format whose dialect keeps its grid in
// shared memory for the kernel (format_iq_grid.h), the copy.
template <typename F>
struct ByteLevels {
  enum { run_pair = 32, contiguous_32 = 0, decodes_runs = 0, offsets = 0, word_rows = 1, half_scale = 0 };
  enum { step_offsets = 0 };
  static MUSER_FN void share_grid() {}
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t w[(N + 3) / 4];
    const Affine a = F::template level_bytes<N, UNIFORM>(row, i, w);
    byte_levels<N>(w, float(F::zero), lv);
    return a;
  }
  template <int RUNS, typename P>  // not called where decodes_runs is 0
  static MUSER_FN void run_levels(P, uint32_t, MUSER_LOCAL uint32_t*, MUSER_LOCAL Affine*) {}
};

// HeadForms<0>: the decoders' forms that a head kernel chooses for itself, a kernel's header
// specializing it (matrix_unit_forms.h, for mma.h and tile_mma.h); read where the kernel
// instantiates its decoder, through a template argument that depends on the decoder's own (a 0
// from N or from share_grid's ZERO), so the kernel's header, which follows the decoders', still
// decides. signed_points: IQ3_XXS's signed level bytes from its signed points in shared memory
// (format_iq3_points.h), else computed.
template <int ZERO>
struct HeadForms {
  enum { signed_points = 0 };
};

// A 16-bit float format F (F16, BF16): one little-endian 16-bit float per value, values i .. i+N-1
// 2N-byte aligned; F::to_float(bits) is the value as float32 (scale 1, offset 0), and
// F::to_floats<N> the N values of words w (value k in half k % 2 of w[k / 2]), which a format may
// replace by a dialect's vector conversion (format_f16.h).
template <typename F>
struct HalfLevels {
  enum { block_values = 1, block_bytes = 2, half_scale = 0 };
  static MUSER_FN void share_grid() {}
  template <int N, bool UNIFORM = false, typename P>
  static MUSER_FN Affine levels(P row, uint32_t i, MUSER_LOCAL float* lv) {
    uint32_t w[(N + 1) / 2];
    bytes_at<2 * N, 2 * N>(row + 2 * i, w);
    F::template to_floats<N>(w, lv);
    return Affine{1.0f, 0.0f};
  }
  template <int N>
  static MUSER_FN void to_floats(MUSER_LOCAL const uint32_t* w, MUSER_LOCAL float* lv) {
    for (int k = 0; k < N; ++k) {
      lv[k] = F::to_float((w[k / 2] >> (16 * (k % 2))) & 0xFFFFu);
    }
  }
};

template <typename F, int N, bool UNIFORM = false, typename P>
MUSER_FN void decode(P row, uint32_t i, MUSER_LOCAL float* v) {
  float lv[N];
  const Affine a = F::template levels<N, UNIFORM>(row, i, lv);
  for (int k = 0; k < N; ++k) {
    v[k] = a.scale * lv[k] - a.offset;
  }
}

}  // namespace muser
