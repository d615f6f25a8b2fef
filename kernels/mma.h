// The LM head on matrix units: x [n, DIMS] -> out [n, VOCAB], out[m, r] = sum_i x[m, i] * W[r, i],
// for the quantized formats (levels are small integers, exact in float16 and bfloat16), the
// products of levels and x taken by lanes_<dialect>.h's muser_mma (one 16 x 8 x 16 warp multiply,
// float32 accumulation) instead of one lane at a time as in matvec.h.
//
// Inputs: xh [PARTS, n, DIMS] in the multiply's 16-bit type H, n a multiple of COLS = 8 * XTILES
// (rows past x's are zeros): x itself (PARTS = 1, float16 or bfloat16), or float32 x as
// PARTS = 3 bfloat16 terms that sum to it exactly; x_sums [DIMS / 16, n] float32, the sums of x
// over each 16 values. Output [n, VOCAB].
// A warp takes ROWS = 16 * VTILES table rows against COLS rows of x per pass, one run of
// RUN = F::affine_values values (one scale and offset) at a time. Lane (g, t) = (lane / 4,
// lane % 4) decodes the run's values LANE * t .. + LANE - 1 (LANE = RUN / 4) of table rows
// 16v + g and 16v + g + 8 of each table tile v and loads the same values of x rows g, g + 8, ...
// (one per x tile), each load serving the VTILES multiplies of its x tile. Numbering the
// multiply's k so that k = 2t, 2t+1, 2t+8, 2t+9 are the lane's values 4s .. 4s+3 in step s (of
// RUN / 16), these are exactly the lane's A and B fragments (lanes_cuda.h's layout): the run's
// RUN / 16 multiplies leave the 16 x 8 dot products of levels and x in D, and the lane adds
// scale * D - offset * (x's sum over the run) to its accumulators, D's elements: (row g, cols
// 2t, 2t+1) and (row g + 8, cols 2t, 2t+1) of each pair of tiles.
// Per pass a warp reads its ROWS table rows once (3,744 B each for Q4_K at DIMS 6,656) and
// COLS * DIMS * PARTS values of xh (from cache: every warp shares x); n > COLS re-streams the table.
// Every lane of a warp runs the same trip counts, so all 32 reach each muser_mma.
// WORD_ROWS: the decoders take the table rows as table_rows.h's row_type allows them (the prelude's
// muser_row where the rows are whole words), else as byte pointers (backends/tuning.py:
// mma_word_rows, where each was measured faster).
// Needs from lanes_<dialect>.h: muser_level_pairs, muser_mma (in xh's type); from the prelude: muser_store.
#pragma once
#include "matrix_unit_forms.h"
#include "table_rows.h"

namespace muser {

enum { mma_rows = 16, mma_cols = 8 };

template <typename F, int DIMS, int VOCAB, int PARTS, int VTILES, int XTILES, int WORD_ROWS, typename TableP,
          typename XP, typename SumP, typename OutP>
MUSER_FN void mma_matvec(TableP table, XP xh, SumP x_sums, uint32_t n, OutP out, uint32_t thread_index,
                         uint32_t thread_count) {
  F::share_grid();
  enum { RUN = F::affine_values, LANE = RUN / 4, STEPS = RUN / 16, COLS = mma_cols * XTILES, ROWS = mma_rows * VTILES };
  const uint64_t row_bytes = uint64_t(DIMS / F::block_values) * F::block_bytes;
  const uint32_t lane = thread_index % 32, g = lane / 4, t = lane % 4;
  const uint32_t step = thread_count / 32 * ROWS;
  typedef typename row_type<F, DIMS, TableP, WORD_ROWS != 0>::type RowP;
  for (uint32_t r0 = thread_index / 32 * ROWS; r0 < uint32_t(VOCAB); r0 += step) {
    RowP rows[VTILES][2];  // table rows 16v + g and 16v + g + 8; past the end: the last row, stored nowhere
    for (int v = 0; v < VTILES; ++v) {
      for (int h = 0; h < 2; ++h) {
        const uint32_t r = r0 + mma_rows * v + g + 8 * h;
        rows[v][h] = RowP(table + (r < uint32_t(VOCAB) ? r : uint32_t(VOCAB) - 1) * row_bytes);
      }
    }
    for (uint32_t m0 = 0; m0 < n; m0 += COLS) {
      float acc[VTILES][XTILES][4];
      for (int v = 0; v < VTILES; ++v) {
        for (int c = 0; c < XTILES; ++c) {
          for (int e = 0; e < 4; ++e) {
            acc[v][c][e] = 0.0f;
          }
        }
      }
      for (uint32_t block = 0; block < uint32_t(DIMS / F::block_values); ++block) {
#pragma unroll
        for (int run = 0; run < F::block_values / RUN; ++run) {
          const uint32_t i = run * RUN + LANE * t;  // the lane's first value within the block
          const uint32_t dim = block * F::block_values + i;
          uint32_t a[VTILES][STEPS][4];  // per step: rows (g, g + 8) x values (4s, 4s+1), then (4s+2, 4s+3)
          Affine affine[VTILES][2];
          for (int v = 0; v < VTILES; ++v) {
            for (int h = 0; h < 2; ++h) {
              uint32_t bytes[STEPS];
              affine[v][h] = F::template level_bytes<LANE>(rows[v][h] + block * F::block_bytes, i, bytes);
              for (int s = 0; s < STEPS; ++s) {
                uint32_t pairs[2];
                muser_level_pairs<F::level_bits, F::zero>(bytes[s], xh, pairs);
                a[v][s][h] = pairs[0];
                a[v][s][h + 2] = pairs[1];
              }
            }
          }
          for (int c = 0; c < XTILES; ++c) {
            float d[VTILES][4];
            for (int v = 0; v < VTILES; ++v) {
              for (int e = 0; e < 4; ++e) {
                d[v][e] = 0.0f;
              }
            }
            for (int p = 0; p < PARTS; ++p) {
              uint32_t b[2 * STEPS];  // x values 4s .. 4s+3 of step s, two per word
              const uint64_t m = p * uint64_t(n) + m0 + mma_cols * c + g;
              bytes_at<2 * LANE, 2 * LANE>(reinterpret_cast<const uint8_t*>(xh + m * DIMS + dim), b);
              for (int v = 0; v < VTILES; ++v) {
                for (int s = 0; s < STEPS; ++s) {
                  muser_mma(a[v][s], b + 2 * s, d[v], xh);
                }
              }
            }
            float sums[2] = {0.0f, 0.0f};  // x rows m0 + 8c + 2t and + 1 over the run
            for (int s = 0; s < (F::offsets ? STEPS : 0); ++s) {
              uint32_t w[2];
              const uint64_t at = uint64_t(dim / RUN * STEPS + s) * n + m0 + mma_cols * c + 2 * t;
              bytes_at<8, 8>(reinterpret_cast<const uint8_t*>(x_sums + at), w);
              sums[0] += muser_f32_bits_to_float(w[0]);
              sums[1] += muser_f32_bits_to_float(w[1]);
            }
            for (int v = 0; v < VTILES; ++v) {
              for (int e = 0; e < 4; ++e) {
                if (F::offsets) acc[v][c][e] -= affine[v][e / 2].offset * sums[e % 2];
                acc[v][c][e] += affine[v][e / 2].scale * d[v][e];
              }
            }
          }
        }
      }
      for (int v = 0; v < VTILES; ++v) {
        for (int c = 0; c < XTILES; ++c) {
          for (int e = 0; e < 4; ++e) {
            const uint32_t m = m0 + mma_cols * c + 2 * t + e % 2, r = r0 + mma_rows * v + g + 8 * (e / 2);
            if (r < uint32_t(VOCAB)) {
              muser_store<1>(out + uint64_t(m) * VOCAB + r, &acc[v][c][e]);
            }
          }
        }
      }
    }
  }
}

}  // namespace muser
