// Q4_K and Q5_K share their 16-byte head (blocks 16-byte aligned, one 16-byte load):
//   0-1 d (f16), 2-3 dmin (f16), 4-15 eight 6-bit scales and eight 6-bit mins, one pair per
//   sub-block s of 32 values; value = (d * scale[s]) * q - dmin * min[s].
// Scale/min packing, byte k of the 12 (x: bits 0-5 of entry j; X: bits 4-5 of entry j+4):
//   k = 0-3   XXxxxxxx   scale j = k
//   k = 4-7   XXxxxxxx   min   j = k - 4
//   k = 8-11  mmmmssss   low 4 bits of min j+4 (m) and scale j+4 (s), j = k - 8
#pragma once
#include "formats.h"

namespace muser {

// Bytes of qs per pair of sub-blocks (64 values, a nibble each): Q4_K's and Q5_K's qs stride.
enum { k_pair_bytes = 32 };

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

}  // namespace muser
