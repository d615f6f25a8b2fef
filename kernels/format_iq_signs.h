// The IQ2 and IQ3 levels: a value is scale * (+-grid value), its level the signed grid value, held
// in a byte as zero + level, zero the grid's largest value (below 128).
#pragma once
#include "format_iq_grid.h"

namespace muser {

// ksigns_iq2xs (gguf-py's IQ2_XXS.ksigns): a group's 8 sign bits from a 7-bit index, bit 7 the
// index's parity (an even count of minus signs per group; 0x6996: the parities of 0..15), or with
// POPC that parity by a population count (the prelude's muser_parity).
template <bool POPC = false>
MUSER_FN uint32_t ksigns(uint32_t index) {
  if (POPC) return index | muser_parity(index) << 7;
  return index | ((0x6996u >> ((index ^ (index >> 4)) & 15u)) & 1u) << 7;
}

// Word h of a group's sign masks (byte b: 0xFF where value 4h + b is minus) from its code, the
// sign byte itself (KSIGNS false: IQ2_S, IQ3_S) or its ksigns index. The multiply copies sign bit b
// to bits b + 7 + 7k (k < 4): for k = b that is byte b's top bit, and no other copy lands on a top
// bit or on another copy; muser_sign_bytes fills each byte from its top bit.
// SHARED: in a dialect's head kernels that keep grids in shared memory, a table of every code's
// two words there, which the threadgroup fills with its grid (share); for IQ2_XXS alone, where it
// measured faster in both heads it was timed in ("Grid memory").
// POPC: ksigns<true>, fewer instructions (CUDA's POPC) but a slower one on sm_90; for IQ2_XS alone,
// whose one-row head measured faster with it and IQ3_XXS's slower ("Sign masks").
template <bool KSIGNS, bool SHARED = false, bool POPC = false>
struct SignMasks {
  enum { codes = KSIGNS ? 128 : 256 };
  static MUSER_FN uint32_t of(uint32_t code, uint32_t h) {
    const uint32_t signs = KSIGNS ? ksigns<POPC>(code) : code;
    return muser_sign_bytes(((signs >> (4 * h)) & 15u) * 0x10204080u);
  }
  static MUSER_FN uint32_t word(uint32_t i) { return of(i / 2, i % 2); }  // the table's word i
#ifdef MUSER_SHARED_GRIDS
  static MUSER_FN uint32_t* table() { return muser_shared_words<2 * codes, 1>(); }
  static MUSER_FN void share() {
    if constexpr (SHARED) muser_fill_words<SignMasks>(table(), 2 * codes);
  }
  static MUSER_FN uint32_t mask(uint32_t code, uint32_t h) {
    if constexpr (SHARED) return table()[2 * code + h];
    return of(code, h);
  }
#else
  static MUSER_FN void share() {}
  static MUSER_FN uint32_t mask(uint32_t code, uint32_t h) { return of(code, h); }
#endif
};

// zero + g, or zero - g where `minus` has 0xFF, for the bytes g of values k .. k + 3 of a group,
// whose grid word is `grid` (value k in byte k % 4) and sign masks' word `minus` (the same
// bytes). No byte's sum or difference crosses into the next.
template <int N>
MUSER_FN uint32_t signed_word(uint32_t grid, uint32_t minus, uint32_t k, uint32_t zero) {
  const uint32_t shift = N >= 4 ? 0 : 8 * (k % 4);
  const uint32_t g = grid >> shift;
  return 0x01010101u * zero + g - ((g << 1) & (minus >> shift));
}

}  // namespace muser
