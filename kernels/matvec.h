// The streaming LM head: x [n, DIMS] -> out [n, VOCAB], out[m, r] = sum_i x[m, i] * W[r, i],
// with W the quantized table, dequantized on the fly and accumulated in float32.
//
// One warp (warp_lanes = 32 threads) per vocab row r, grid-stride over the rows. Lane l decodes
// values VALUES * (l + 32 k) .. + VALUES - 1 of the row (consecutive lanes read consecutive
// bytes), multiplies them into ROWS accumulators, one per row of x in the current block of ROWS,
// then muser_sum reduces each accumulator across the warp and lane m stores row m's logit.
// Per vocab row and block of ROWS rows of x it reads the row once (3,744 B for Q4_K at
// DIMS 6,656), ROWS * DIMS values of x (from cache: x is shared by every warp) and writes ROWS
// values. n > ROWS re-streams the table once per block; long x takes the tiled matmul path.
// Every lane of a warp runs the same loop trip counts, so all 32 reach each muser_sum.
// Needs from the prelude: muser_sum (a sum over the 32 lanes of a warp), muser_store.
#pragma once

namespace muser {

enum { warp_lanes = 32 };

template <typename F, int DIMS, int VOCAB, int VALUES, int ROWS, typename TableP, typename XP, typename OutP>
MUSER_FN void matvec(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t thread_index,
                     uint32_t thread_count) {
  static_assert(ROWS >= 1 && ROWS <= warp_lanes, "lane m stores row m of a block");
  const uint64_t row_bytes = uint64_t(DIMS / F::block_values) * F::block_bytes;
  const uint32_t lane = thread_index % warp_lanes;
  const uint32_t warps = thread_count / warp_lanes;
  for (uint32_t r = thread_index / warp_lanes; r < uint32_t(VOCAB); r += warps) {
    TableP row = table + r * row_bytes;
    for (uint32_t m0 = 0; m0 < n_rows; m0 += ROWS) {
      const uint32_t live = n_rows - m0 < uint32_t(ROWS) ? n_rows - m0 : uint32_t(ROWS);
      float acc[ROWS];
      for (int m = 0; m < ROWS; ++m) {
        acc[m] = 0.0f;
      }
      for (uint32_t i = lane * VALUES; i < uint32_t(DIMS); i += warp_lanes * VALUES) {
        float v[VALUES];
        F::template decode<VALUES>(row, i, v);
        for (int m = 0; m < ROWS; ++m) {
          if (uint32_t(m) < live) {
            XP xm = x + (m0 + m) * uint64_t(DIMS) + i;
            for (int k = 0; k < VALUES; ++k) {
              acc[m] += v[k] * float(xm[k]);
            }
          }
        }
      }
      for (int m = 0; m < ROWS; ++m) {
        float logit = muser_sum(acc[m]);
        if (lane == uint32_t(m) && uint32_t(m) < live) {
          muser_store<1>(out + (m0 + m) * uint64_t(VOCAB) + r, &logit);
        }
      }
    }
  }
}

}  // namespace muser
