// The IQ2 and IQ3 levels: a value is scale * (+-grid value), its level the signed grid value, held
// in a byte as zero + level, zero the grid's largest value (below 128).
#pragma once
#include "format_iq_grid.h"

namespace muser {

// ksigns_iq2xs (gguf-py's IQ2_XXS.ksigns): a group's 8 sign bits from a 7-bit index, bit 7 the
// index's parity (an even count of minus signs per group; 0x6996: the parities of 0..15).
MUSER_FN uint32_t ksigns(uint32_t index) {
  return index | ((0x6996u >> ((index ^ (index >> 4)) & 15u)) & 1u) << 7;
}

// Word h of a group's sign masks (byte b: 0xFF where value 4h + b is minus) from its code, the
// sign byte itself (KSIGNS false: IQ2_S, IQ3_S) or its ksigns index (IQ3_XXS). The multiply copies
// sign bit b to bits b + 7 + 7k (k < 4): for k = b that is byte b's top bit, and no other copy
// lands on a top bit or on another copy; muser_sign_bytes fills each byte from its top bit.
template <bool KSIGNS>
struct SignMasks {
  static MUSER_FN uint32_t mask(uint32_t code, uint32_t h) {
    const uint32_t signs = KSIGNS ? ksigns(code) : code;
    return muser_sign_bytes(((signs >> (4 * h)) & 15u) * 0x10204080u);
  }
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

// The selector grids (IQ2_XXS, IQ2_XS: muser_mlx/formats/grids.py): a point's word holds value v's
// index among the grid's levels in nibble v. Bit 2 of nibble v set where value v is minus makes
// it a byte selector of the 8 level bytes zero + level (bytes 0-2) and zero - level (bytes 4-6),
// so one byte select (the prelude's muser_select_bytes: CUDA's prmt) gives four signed level
// bytes, and the sign mask, its shifts and the subtraction of signed_word are gone.
// SignSelectors::select(index): the bits 2 of a group's ksigns index; in a dialect's head kernels
// that keep grids in shared memory, from a table of all 128 there, which the threadgroup fills with
// its grid (share); elsewhere computed, the sign bits spread to nibbles by three shift-and-masks.
struct SignSelectors {
  enum { codes = 128 };
  static MUSER_FN uint32_t of(uint32_t index) {
    uint32_t s = ksigns(index);             // bit b
    s = (s | s << 12) & 0x000F000Fu;         // bits 0-3 at 0-3, 4-7 at 16-19
    s = (s | s << 6) & 0x03030303u;          // at 0-1, 8-9, 16-17, 24-25
    return ((s | s << 3) & 0x11111111u) << 2;  // bit b at 4b + 2
  }
  static MUSER_FN uint32_t word(uint32_t i) { return of(i); }  // the table's word i
#ifdef MUSER_SHARED_GRIDS
  static MUSER_FN uint32_t* table() { return muser_shared_words<codes, 1>(); }
  static MUSER_FN void share() { muser_fill_words<SignSelectors>(table(), codes); }
  static MUSER_FN uint32_t select(uint32_t index) { return table()[index]; }
#else
  static MUSER_FN void share() {}
  static MUSER_FN uint32_t select(uint32_t index) { return of(index); }
#endif
};

// The level bytes of values k .. k + 3 of a group (value k in byte 0) from its selector, grid word
// | SignSelectors::select, of a grid of LEVELS (bytes, *_levels) below ZERO + 1.
template <int ZERO, uint32_t LEVELS>
MUSER_FN uint32_t selected_word(uint32_t selector, uint32_t k) {
  enum : uint32_t { PLUS = 0x01010101u * ZERO + LEVELS, MINUS = 0x01010101u * ZERO - LEVELS };
  return muser_select_bytes(PLUS, MINUS, selector >> (4 * k));
}

}  // namespace muser
