// Q5_0's and Q5_1's fifth bits: bit 4 of value j's level is bit j of the little-endian 32-bit
// word qh, above format_half_nibbles.h's nibble.
#pragma once
#include "format_half_nibbles.h"

namespace muser {

// Bit 4 of the levels of values j .. j+N-1 added to w (half_nibbles' bytes), from qh at p
// (aligned to ALIGN bytes): bits j + 4k .. j + 4k + 3 of qh become bit 4 of bytes 0-3 of w[k].
template <int N, int ALIGN, typename P>
MUSER_FN void add_high_bits(P qh, uint32_t j, MUSER_LOCAL uint32_t* w) {
  uint32_t bits[1];
  bytes_at<4, ALIGN>(qh, bits);
  for (int k = 0; k < (N + 3) / 4; ++k) {
    w[k] |= bits_to_bytes(bits[0] >> (j + 4 * k)) << 4;
  }
}

}  // namespace muser
