// The 2-bit levels of a 256-value block (Q2_K, TQ2_0; Q3_K's low bits) in 64 bytes qs:
//   value 128p + 32s + l (p = 0, 1; s = 0..3; l = 0..31) is bits 2s, 2s+1 of qs[32p + l]
#pragma once
#include "formats.h"

namespace muser {

// The levels of values j .. j+N-1 (j % N == 0, N <= 32) of the block whose qs is at p, aligned to
// ALIGN bytes: byte k of w holds value j + k's.
template <int N, int ALIGN, bool UNIFORM = false, typename P>
MUSER_FN void two_bits(P qs, uint32_t j, MUSER_LOCAL uint32_t* w) {
  const uint32_t shift = 2 * (j / 32 % 4);
  bytes_at<N, ALIGN, UNIFORM>(qs + 32 * (j / 128) + j % 32, w);
  for (int k = 0; k < (N + 3) / 4; ++k) {
    w[k] = (w[k] >> shift) & 0x03030303u;
  }
}

// The levels of the RUNS runs of 16 values j + 32 q (j % 16 == 0, (j + 32 (RUNS - 1)) / 128 ==
// j / 128): the same 16 qs bytes at shifts 2 apart, loaded once (kernels/bytedot.h's paired runs;
// nvcc loads them again for a second two_bits call).
template <int RUNS, int ALIGN, typename P>
MUSER_FN void two_bit_runs(P qs, uint32_t j, MUSER_LOCAL uint32_t* w) {
  uint32_t bytes[4];
  bytes_at<16, ALIGN>(qs + 32 * (j / 128) + j % 32, bytes);
  for (int q = 0; q < RUNS; ++q) {
    for (int k = 0; k < 4; ++k) {
      w[4 * q + k] = (bytes[k] >> (2 * (j / 32 % 4 + q))) & 0x03030303u;
    }
  }
}

}  // namespace muser
