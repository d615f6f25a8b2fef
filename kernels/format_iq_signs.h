// The IQ2 and IQ3 levels: a value is scale * (+-grid value), its level the signed grid value, held
// in a byte as zero + level, zero the grid's largest value (below 128).
#pragma once
#include "format_iq_grid.h"

namespace muser {

// zero + g, or zero - g where bit k + b of signs is set, for the bytes g (b = 0..3) of values
// k .. k + 3 of a group, whose grid word is `grid` (value k in byte k % 4). The multiply puts sign
// bit b at bit 8b (its copies 0, 7, 14 and 21 bits up do not overlap), * 255 fills the byte; no
// byte's sum or difference crosses into the next.
template <int N>
MUSER_FN uint32_t signed_word(uint32_t grid, uint32_t signs, uint32_t k, uint32_t zero) {
  const uint32_t g = grid >> (N >= 4 ? 0 : 8 * (k % 4));
  const uint32_t minus = ((((signs >> k) & 15u) * 0x00204081u) & 0x01010101u) * 255u;
  return 0x01010101u * zero + g - ((g << 1) & minus);
}

// ksigns_iq2xs (gguf-py's IQ2_XXS.ksigns): a group's 8 sign bits from a 7-bit index, bit 7 the
// index's parity (an even count of minus signs per group; 0x6996: the parities of 0..15).
MUSER_FN uint32_t ksigns(uint32_t index) {
  return index | ((0x6996u >> ((index ^ (index >> 4)) & 15u)) & 1u) << 7;
}

}  // namespace muser
