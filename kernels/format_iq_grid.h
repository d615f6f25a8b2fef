// What the grid (codebook) formats share: a value is scale * (its grid value with a sign), so its
// level is that signed grid value, a small integer; a byte holds it as zero + level, zero the grid's
// largest value (kernels/iq*_grid.h, generated from gguf-py's tables; MUSER_CONSTANT from the
// prelude). Per word, four values at once: a grid word's bytes g (<= zero < 128) become zero + g or
// zero - g by a mask of their signs, neither crossing a byte.
#pragma once
#include "formats.h"

namespace muser {

// 0xFF in byte k for each set bit k (k < 4) of bits: the multiply puts bit k at bit 8k (its four
// copies, 0, 7, 14 and 21 bits up, do not overlap), the second fills the byte.
MUSER_FN uint32_t sign_mask(uint32_t bits) {
  return (((bits & 15u) * 0x00204081u) & 0x01010101u) * 255u;
}

// zero + g per byte of g, zero - g where the mask m is 0xFF (zeros: zero in every byte).
MUSER_FN uint32_t signed_bytes(uint32_t g, uint32_t m, uint32_t zeros) {
  return zeros + g - ((g << 1) & m);
}

// ksigns_iq2xs (gguf-py's IQ2_XXS.ksigns): the 8 sign bits of a group of 8 values from a 7-bit
// index, bit 7 the index's parity (an even count of minus signs per group). Bit k: value k is minus.
MUSER_FN uint32_t ksigns(uint32_t index) {
  uint32_t parity = index ^ (index >> 4);
  parity ^= parity >> 2;
  parity ^= parity >> 1;
  return index | ((parity & 1u) << 7);
}

// level_bytes<N> at value j (j % N == 0) of the formats of 8-value groups (IQ2, IQ1): output word c
// (values v .. v + 3, or only N of them for N < 4) lies in group group_of<N>(j, c) of the block,
// from value in_group<N>(j, c) of it; byte_shift<N>(k) brings value k's byte of its grid word to
// byte 0.
template <int N>
MUSER_FN uint32_t group_of(uint32_t j, int c) {
  return j / 8 + (N >= 8 ? c / 2 : 0);
}
template <int N>
MUSER_FN uint32_t in_group(uint32_t j, int c) {
  return N >= 8 ? 4 * (c % 2) : j % 8;
}
template <int N>
MUSER_FN uint32_t byte_shift(uint32_t k) {
  return N >= 4 ? 0 : 8 * (k % 4);
}

}  // namespace muser
