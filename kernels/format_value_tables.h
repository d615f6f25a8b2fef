// The 16-value tables of the non-linear 4-bit formats (ggml-common.h), as ByteTables of level
// bytes: entry q is the table's value q plus the format's zero. tests/test_kernel_source.py checks
// each, element by element, against gguf-py's.
#pragma once
#include "format_half_nibbles.h"

namespace muser {

// A 16-entry table of bytes as two 64-bit words: entry q in byte q % 8 of lo (q < 8) or hi, each
// made by table_word from its values, so that the text lists them; the compiler folds the
// constants, and a lookup is shifts and masks on registers, no memory.
struct ByteTable {
  uint64_t lo, hi;
};

// Bytes v0 + bias .. v7 + bias (each 0..255) as one little-endian word.
MUSER_FN uint64_t table_word(int bias, int v0, int v1, int v2, int v3, int v4, int v5, int v6, int v7) {
  const int v[8] = {v0, v1, v2, v3, v4, v5, v6, v7};
  uint64_t word = 0;
  for (int k = 0; k < 8; ++k) {
    word |= uint64_t(uint32_t(v[k] + bias) & 255u) << (8 * k);
  }
  return word;
}

// Byte k of the result is entry (byte k of w) of t, for w's bytes below 16.
MUSER_FN uint32_t table_bytes(ByteTable t, uint32_t w) {
  uint32_t r = 0;
  for (int k = 0; k < 4; ++k) {
    const uint32_t q = (w >> (8 * k)) & 15u;
    r |= uint32_t(((q < 8 ? t.lo : t.hi) >> (8 * (q & 7u))) & 255u) << (8 * k);
  }
  return r;
}

// table_bytes over the words of N values: byte k of each w[c] (below 16) becomes entry (byte k) of t.
// A dialect with byte shuffles defines MUSER_TABLE_BYTES and muser_table_bytes<WORDS>(lo, hi, w)
// for WORDS a multiple of MUSER_TABLE_WORDS, the same bytes (prelude_cpu.h: 16-byte pshufb on
// x86, tbl on arm64, where the lookup per byte cost the CPU's gather up to 5x the instructions;
// prelude_cuda.h: PRMT, a word at a time).
template <int N>
MUSER_FN void table_lookup(ByteTable t, MUSER_LOCAL uint32_t* w) {
#ifdef MUSER_TABLE_BYTES
  if constexpr ((N + 3) / 4 % MUSER_TABLE_WORDS == 0) {
    muser_table_bytes<(N + 3) / 4>(t.lo, t.hi, w);
  } else
#endif
  {
    for (int k = 0; k < (N + 3) / 4; ++k) {
      w[k] = table_bytes(t, w[k]);
    }
  }
}

// The levels of values j .. j+N-1 of a run of 2 * HALF values whose codes are half_nibbles'
// (format_half_nibbles.h), looked up in t. Where a dialect looks up a word's eight codes at once
// (MUSER_TABLE_NIBBLES: the low nibbles' levels in one word, the high ones' in another) and N
// takes both halves, the qs words go to it whole, their nibbles never split apart.
template <int N, int HALF, int ALIGN, bool UNIFORM = false, typename P>
MUSER_FN void nibble_levels(P qs, uint32_t j, ByteTable t, MUSER_LOCAL uint32_t* w) {
#ifdef MUSER_TABLE_NIBBLES
  if constexpr (N == 2 * HALF) {
    uint32_t q[HALF / 4];
    bytes_at<HALF, ALIGN, UNIFORM>(qs, q);
    for (int k = 0; k < HALF / 4; ++k) {
      muser_table_nibbles(t.lo, t.hi, q[k], w + k, w + HALF / 4 + k);
    }
  } else
#endif
  {
    half_nibbles<N, HALF, ALIGN, UNIFORM>(qs, j, w);
    table_lookup<N>(t, w);
  }
}

// kvalues_iq4nl (IQ4_NL, IQ4_XS); bytes value + 128.
MUSER_FN ByteTable iq4nl_values() {
  return ByteTable{table_word(128, -127, -104, -83, -65, -49, -35, -22, -10),
                   table_word(128, 1, 13, 25, 38, 53, 69, 89, 113)};
}

// kvalues_mxfp4 (MXFP4, NVFP4): the E2M1 values doubled, q = sign bit, 2 exponent bits, 1 mantissa
// bit; bytes value + 12.
MUSER_FN ByteTable e2m1_values() {
  return ByteTable{table_word(12, 0, 1, 2, 3, 4, 6, 8, 12), table_word(12, 0, -1, -2, -3, -4, -6, -8, -12)};
}

}  // namespace muser
