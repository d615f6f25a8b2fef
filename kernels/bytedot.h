// The LM head on byte dot products: x [n, DIMS] -> out [n, VOCAB] as matvec.h computes it, for
// the quantized formats, whose levels are bytes (formats.h: level_bytes), the products of levels
// and x summed four at a time in 32-bit integers by lanes_<dialect>.h's muser_dot4 (CUDA's dp4a).
//
// x comes in as xruns.h's records: per run of 16 values, x = unit * X with X's bytes in PLANES
// byte planes (the top one signed). sum((byte - zero) * X) over a run is then exact, one
// muser_dot4 per 4 values and plane, and the run adds
//   unit * (scale * sum((byte - zero) * X) - offset * sum(X))
// to its logit (formats.h: value = scale * (byte - zero) - offset).
// The frame is matvec.h's stream_logits: one warp per VROWS vocab rows, grid-stride; ROWS rows of
// x per pass. ByteLanes: per step lane l takes RUNS runs of unit u (u = l, l + 32, ...): RUNS 2
// or 4, values i + P q for q < RUNS, P = F::run_pair (formats.h; where it is 16, and for Q4_K,
// Q5_K and the decodes_runs formats, runs P apart share their bytes),
// with i = RUNS P (u / 2) + 16 (u % 2) for P 32 and i = RUNS 16 u for P 16 (decodes of 32
// values); RUNS 1, values i = 16 u. It loads those runs' records once and reuses them for its
// VROWS table rows.
// Needs matvec.h (stream_logits), xruns.h (the records), from lanes_<dialect>.h muser_dot4 and
// muser_sum, from the prelude muser_store.
#pragma once
#include "matvec.h"
#include "table_rows.h"
#include "xruns.h"

namespace muser {

// A run's term of the logit: levels = 16 level bytes (4 words) with their Affine, against x's
// run record r (xruns.h).
template <int PLANES, int ZERO, bool OFFSETS>
MUSER_FN float run_term(MUSER_LOCAL const uint32_t* levels, Affine a, MUSER_LOCAL const uint32_t* r) {
  typedef XRunRecord<PLANES> R;
  int s[PLANES];  // sum((byte - ZERO) * byte p of X), exact
  for (int p = 0; p < PLANES; ++p) {
    s[p] = -ZERO * int(r[R::plane_sums + p]);
    for (int c = 0; c < 4; ++c) {
      s[p] = p == PLANES - 1 ? muser_dot4<true>(levels[c], r[R::planes + 4 * p + c], s[p])
                             : muser_dot4<false>(levels[c], r[R::planes + 4 * p + c], s[p]);
    }
  }
  const float dot = PLANES == 2 ? float(s[0] + 256 * s[1]) : float(s[PLANES - 1]) * 65536.0f + float(s[0] + 256 * s[1]);
  const float unit = muser_f32_bits_to_float(r[R::unit]);
  return OFFSETS ? unit * (a.scale * dot - a.offset * muser_f32_bits_to_float(r[R::sum])) : unit * (a.scale * dot);
}

// dims a multiple of 32 * RUNS (whole units of RUNS runs).
template <typename F, int ROWS, int VROWS, int RUNS, int PLANES>
struct ByteLanes {
  // x: the records of x's runs, [n, dims / 16, XRunRecord<PLANES>::words] words.
  template <typename TableP, typename XP>
  static MUSER_FN void add(MUSER_LOCAL const TableP* rows, XP x, uint32_t m0, uint32_t live, uint32_t lane,
                           uint32_t dims, MUSER_LOCAL float (*acc)[ROWS]) {
    enum { WORDS = XRunRecord<PLANES>::words, P = F::run_pair, PER = P / x_run_values };
    // runs per decode: all RUNS where the format decodes_runs; two at once where P is 16
    enum { C = F::decodes_runs ? RUNS : RUNS > 1 && P == x_run_values ? 2 : 1 };
    // A lane's values move by STEP (a whole number of blocks) a step. Where the format takes
    // step_offsets (formats.h), its decoder gets the lane's first value index i0 and the byte
    // offset of the step's blocks from the first step's, a block position that does not change
    // from step to step, so nvcc computes what follows from it once, not every step.
    enum { STEP = warp_lanes * x_run_values * RUNS, STEP_BYTES = STEP / F::block_values * F::block_bytes };
    static_assert(STEP % F::block_values == 0, "a step moves by whole blocks");
    const uint32_t i0 = RUNS > 1 ? RUNS * P * (lane / PER) + x_run_values * (lane % PER) : x_run_values * lane;
    uint32_t at = 0;
    for (uint32_t u = lane; u < dims / (x_run_values * RUNS); u += warp_lanes, at += STEP_BYTES) {
      const uint32_t i = RUNS > 1 ? RUNS * P * (u / PER) + x_run_values * (u % PER) : x_run_values * u;
      const uint32_t j = F::step_offsets ? i0 : i, offset = F::step_offsets ? at : 0;  // the decoders' i, row
      uint32_t r[ROWS][RUNS][WORDS];  // rows past n repeat row m0: their logits are never stored
      for (int m = 0; m < ROWS; ++m) {
        for (int q = 0; q < RUNS; ++q) {
          const uint64_t run = (m0 + (uint32_t(m) < live ? m : 0)) * uint64_t(dims / x_run_values) + (i | (P * q)) / 16;
          bytes_at<4 * WORDS, 16>(reinterpret_cast<const uint8_t*>(x + run * WORDS), r[m][q]);
        }
      }
      // unrolled, so that acc and rows stay in registers: left to itself, nvcc keeps the loop
      // for the grid formats, Q3_K and Q6_K at VROWS 8, and both arrays on the stack
#pragma unroll
      for (int v = 0; v < VROWS; ++v) {
        // each decode's terms before the next decode (Q4_K measured 0.19 against 0.24 ms with
        // both decodes first); a format that decodes_runs decodes all RUNS at once (formats.h)
        for (int q = 0; q < RUNS; q += C) {
          uint32_t levels[4 * C];
          Affine a[C];
          if (F::decodes_runs) {
            F::template run_levels<C>(rows[v] + offset, j, levels, a);
          } else {  // one scale; j | P q is j + P q (j has no bit P): nvcc sees the runs share a block
            a[0] = F::template level_bytes<x_run_values * C>(rows[v] + offset, j | (P * q), levels);
          }
          for (int m = 0; m < ROWS; ++m) {
            for (int d = 0; d < C; ++d) {
              acc[v][m] += run_term<PLANES, F::zero, F::offsets>(levels + 4 * d, a[F::decodes_runs ? d : 0], r[m][q + d]);
            }
          }
        }
      }
    }
  }
};

template <typename F, int DIMS, int VOCAB, int ROWS, int VROWS, int RUNS, int PLANES, typename TableP, typename XP,
          typename OutP>
MUSER_FN void bytedot(TableP table, XP x, uint32_t n_rows, OutP out, uint32_t thread_index, uint32_t thread_count) {
  static_assert(DIMS % (x_run_values * 2 * RUNS) == 0, "whole units of RUNS runs");
  static_assert(ROWS * VROWS <= warp_lanes, "one lane per logit of a pass");
  typedef typename row_type<F, DIMS, TableP>::type RowP;
  stream_logits<F, ROWS, VROWS, ByteLanes<F, ROWS, VROWS, RUNS, PLANES>, RowP>(table, x, n_rows, out, DIMS, VOCAB,
                                                                               thread_index, thread_count);
}

}  // namespace muser
