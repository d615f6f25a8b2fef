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

}  // namespace muser
