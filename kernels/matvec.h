// The streaming LM head: x [n, DIMS] -> out [n, VOCAB], out[m, r] = sum_i x[m, i] * W[r, i],
// with W the quantized table, dequantized on the fly and accumulated in float32.
//
// The frame, stream_logits (shared with bytedot.h): one warp (warp_lanes threads: the dialect's
// muser_warp_lanes, 32 on the GPUs, 1 for the CPU extension's threads) per VROWS consecutive vocab
// rows, grid-stride over them; per pass over ROWS rows of x, the kernel's Lanes::add gives each
// lane's share of the VROWS * ROWS logits, muser_sum reduces each across the warp and lane
// (v * ROWS + m) % warp_lanes stores logit (m, r0 + v). Every lane of a warp runs the same loop
// trip counts, so all reach each muser_sum.
// matvec's lanes (FloatLanes): lane l handles values VALUES * (l + 32 k) .. + VALUES - 1 of every
// row (VALUES 1-32), in runs of RUN = min(VALUES, 16) values, one run per decode
// (kernels/formats.h: one scale and offset). Per step it loads those values of the ROWS rows of x
// in the current pass once, with each run's sums, reads the levels of each of the VROWS table rows
// and adds scale * sum(x * level) - offset * sum(x) per run to its VROWS * ROWS float32 sums.
// Per pass, a warp reads its VROWS table rows once (3,744 B each for Q4_K at DIMS 6,656) and
// ROWS * DIMS values of x (from cache: every warp shares x), and writes VROWS * ROWS logits.
// n > ROWS re-streams the table once per pass; long x takes the tiled matmul path.
// The sizes come at run time (dims, vocab: the CPU extension, one build for every table); the GPU
// dialects' matvec<> passes its compiled-in DIMS and VOCAB.
// Needs from lanes_<dialect>.h: muser_warp_lanes, muser_sum (a sum over the lanes of a warp),
// muser_load_x (and, where it defines MUSER_DOT, muser_dot); from the prelude: muser_store.
#pragma once
#include "formats.h"

namespace muser {

enum { warp_lanes = muser_warp_lanes };

// Lanes::add(rows, x, m0, live, lane, dims, acc) adds the lane's share of logit (m0 + m, row v) to
// acc[v][m] for the VROWS table rows rows[v] (in a table of fewer than VROWS rows, its last row
// again, stored nowhere) and the live <= ROWS rows of x from m0 (the rest are never stored);
// RowP(p) is the row at byte pointer p as the decoders take it (table_rows.h: row_type).
template <typename F, int ROWS, int VROWS, typename Lanes, typename RowP, typename TableP, typename XP, typename OutP>
MUSER_FN void stream_logits(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t dims, uint32_t vocab,
                            uint32_t thread_index, uint32_t thread_count) {
  F::share_grid();
  const uint64_t row_bytes = uint64_t(dims / F::block_values) * F::block_bytes;
  const uint32_t lane = thread_index % warp_lanes;
  const uint32_t step = thread_count / warp_lanes * VROWS;
  for (uint32_t r = thread_index / warp_lanes * VROWS; r < vocab; r += step) {
    // rows r0 .. r0 + VROWS - 1, all in the table: at its end r0 < r (the rows before r again,
    // the same logits stored twice), and a table of fewer rows repeats its last.
    const uint32_t r0 = vocab <= uint32_t(VROWS) ? 0u : r < vocab - VROWS ? r : vocab - VROWS;
    RowP rows[VROWS];
    for (int v = 0; v < VROWS; ++v) {
      rows[v] = RowP(table + r0 * row_bytes + (uint32_t(v) < vocab ? uint32_t(v) : vocab - 1) * row_bytes);
    }
    for (uint32_t m0 = 0; m0 < n_rows; m0 += ROWS) {
      const uint32_t live = n_rows - m0 < uint32_t(ROWS) ? n_rows - m0 : uint32_t(ROWS);
      float acc[VROWS][ROWS];
      for (int v = 0; v < VROWS; ++v) {
        for (int m = 0; m < ROWS; ++m) {
          acc[v][m] = 0.0f;
        }
      }
      Lanes::add(rows, x, m0, live, lane, dims, acc);
      for (int v = 0; v < VROWS; ++v) {
        for (int m = 0; m < ROWS; ++m) {
          float logit = muser_sum(acc[v][m]);
          if (lane == uint32_t(v * ROWS + m) % warp_lanes && uint32_t(m) < live && uint32_t(v) < vocab) {
            muser_store<1>(out + (m0 + m) * uint64_t(vocab) + r0 + v, &logit);
          }
        }
      }
    }
  }
}

template <typename F, int VALUES, int ROWS, int VROWS>
struct FloatLanes {
  enum { RUN = VALUES < 16 ? VALUES : 16, RUNS = VALUES / RUN };
  static_assert(RUNS * RUN == VALUES, "a lane's values are whole runs");

  template <typename TableP, typename XP>
  static MUSER_FN void add(MUSER_LOCAL const TableP* rows, XP x, uint32_t m0, uint32_t live, uint32_t lane,
                           uint32_t dims, MUSER_LOCAL float (*acc)[ROWS]) {
    for (uint32_t i = lane * VALUES; i < dims; i += warp_lanes * VALUES) {
      float xs[ROWS][VALUES], x_sum[ROWS][RUNS];
      for (int m = 0; m < ROWS; ++m) {  // rows past n are zeros: their sums are never stored
        if (uint32_t(m) < live) {
          muser_load_x<VALUES>(x + (m0 + m) * uint64_t(dims) + i, xs[m]);
        } else {
          for (int k = 0; k < VALUES; ++k) {
            xs[m][k] = 0.0f;
          }
        }
        for (int c = 0; c < RUNS; ++c) {
          x_sum[m][c] = 0.0f;
          for (int k = 0; k < RUN; ++k) {
            x_sum[m][c] += xs[m][c * RUN + k];
          }
        }
      }
      for (int v = 0; v < VROWS; ++v) {
        for (int c = 0; c < RUNS; ++c) {
          float lv[RUN];
          const Affine a = F::template levels<RUN>(rows[v], i + c * RUN, lv);
          for (int m = 0; m < ROWS; ++m) {
            float dot = 0.0f;  // lanes_cpu_serial.h's muser_dot where MUSER_DOT: a vector sum
#ifdef MUSER_DOT
            dot = muser_dot<RUN>(lv, xs[m] + c * RUN);
#else
            for (int k = 0; k < RUN; ++k) {
              dot += lv[k] * xs[m][c * RUN + k];
            }
#endif
            acc[v][m] += a.scale * dot - a.offset * x_sum[m][c];
          }
        }
      }
    }
  }
};

template <typename F, int VALUES, int ROWS, int VROWS, typename TableP, typename XP, typename OutP>
MUSER_FN void matvec_rows(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t dims, uint32_t vocab,
                          uint32_t thread_index, uint32_t thread_count) {
  stream_logits<F, ROWS, VROWS, FloatLanes<F, VALUES, ROWS, VROWS>, TableP>(table, x, n_rows, out, dims, vocab,
                                                                            thread_index, thread_count);
}

template <typename F, int DIMS, int VOCAB, int VALUES, int ROWS, int VROWS, typename TableP, typename XP,
          typename OutP>
MUSER_FN void matvec(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t thread_index,
                     uint32_t thread_count) {
  static_assert(ROWS * VROWS <= warp_lanes, "one lane per logit of a pass");
  matvec_rows<F, VALUES, ROWS, VROWS>(table, x, n_rows, out, DIMS, VOCAB, thread_index, thread_count);
}

}  // namespace muser
