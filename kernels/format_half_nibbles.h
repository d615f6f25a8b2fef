// Runs of 2 * HALF values in HALF bytes qs: value j < HALF in the low nibble of qs[j], value
// HALF + j in the high one. ggml's 32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4) and IQ4_XS's
// sub-blocks hold 32 values so (HALF 16), NVFP4's sub-blocks 16 (HALF 8).
#pragma once
#include "formats.h"

namespace muser {

// The nibbles of values j .. j+N-1 (j % N == 0, N <= 2 * HALF) of the run whose qs is at p,
// aligned to ALIGN bytes: byte k of w holds value j + k's. N = 2 * HALF takes both halves of
// the HALF bytes.
template <int N, int HALF, int ALIGN, bool UNIFORM = false, typename P>
MUSER_FN void half_nibbles(P qs, uint32_t j, MUSER_LOCAL uint32_t* w) {
  static_assert(N <= 2 * HALF, "values of one run");
  enum { LOADED = N < HALF ? N : HALF, WORDS = (LOADED + 3) / 4 };  // bytes of qs read, as words
  const uint32_t shift = (j / HALF) * 4;
  bytes_at<LOADED, ALIGN, UNIFORM>(qs + j % HALF, w);
  for (int k = 0; k < WORDS; ++k) {
    if (N > HALF) {
      w[WORDS + k] = (w[k] >> 4) & 0x0F0F0F0Fu;
    }
    w[k] = (w[k] >> shift) & 0x0F0F0F0Fu;
  }
}

}  // namespace muser
