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
// PAIRS 2 (blocks of at least two runs): a lane decodes 2 LANE values of one run of a pair, its own
// and its partner's (lane t ^ 1), and the two exchange the halves (paired_runs); half the decodes.
// WORD_ROWS: the decoders take the table rows as table_rows.h's row_type allows them (the prelude's
// muser_row where the rows are whole words), else as byte pointers (backends/tuning.py:
// mma_word_rows, where each was measured faster).
// Needs from lanes_<dialect>.h: muser_level_pairs, muser_mma (in xh's type), muser_lane_xor, muser_float_bits;
// from the prelude: muser_store.
#pragma once
#include "matrix_unit_forms.h"
#include "table_rows.h"

namespace muser {

enum { mma_rows = 16, mma_cols = 8 };

// A lane's decode of PAIRS runs' values. PAIRS 1: its own LANE values of one run. PAIRS 2: 2 LANE
// values of run t % 2 (its own LANE of that run and those of lane t ^ 1, in value order); the half
// that is lane t ^ 1's goes to it in exchange for the half of the other run that is its own (one
// exchange a word of STEPS, and of each float of the affine). After, w[STEPS r + s] is word s of
// the lane's values of run r, affine[r][h] that run's affine: half the decodes, each of twice the
// values.
template <typename F, int PAIRS, int STEPS>
MUSER_FN void paired_runs(Affine mine, uint32_t t, MUSER_LOCAL uint32_t* w, Affine (*affine)[2], int h) {
  if constexpr (PAIRS == 1) {
    affine[0][h] = mine;
  } else {
    const bool odd = t % 2;  // its decode: run 1 (the partner's half first), else run 0 (its own first)
    for (int s = 0; s < STEPS; ++s) {
      const int k = odd ? s : STEPS + s;  // the partner's word, replaced by the partner's word of the other run
      w[k] = muser_lane_xor(w[k], 1);
    }
    Affine other = {muser_f32_bits_to_float(muser_lane_xor(muser_float_bits(mine.scale), 1)), 0.0f};
    if constexpr (F::offsets) {
      other.offset = muser_f32_bits_to_float(muser_lane_xor(muser_float_bits(mine.offset), 1));
    }
    affine[0][h] = odd ? other : mine;
    affine[1][h] = odd ? mine : other;
  }
}

template <typename F, int DIMS, int VOCAB, int PARTS, int VTILES, int XTILES, int WORD_ROWS, int PAIRS, typename TableP,
          typename XP, typename SumP, typename OutP>
MUSER_FN void mma_matvec(TableP table, XP xh, SumP x_sums, uint32_t n, OutP out, uint32_t thread_index,
                         uint32_t thread_count) {
  F::share_grid();
  static_assert(PAIRS == 1 || F::block_values % (2 * F::affine_values) == 0, "PAIRS 2: a block of whole pairs of runs");
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
        for (int pair = 0; pair < F::block_values / RUN / PAIRS; ++pair) {
          uint32_t a[VTILES][PAIRS][STEPS][4];  // per run and step: rows (g, g + 8) x values (4s, 4s+1), then (4s+2, 4s+3)
          Affine affine[VTILES][PAIRS][2];
          for (int v = 0; v < VTILES; ++v) {
            for (int h = 0; h < 2; ++h) {
              uint32_t bytes[PAIRS * STEPS];  // run r's LANE values of the lane: words STEPS r ..
              const uint32_t i = (pair * PAIRS + t % PAIRS) * RUN + PAIRS * LANE * (t / PAIRS);  // its decode's first value
              paired_runs<F, PAIRS, STEPS>(
                  F::template level_bytes<PAIRS * LANE>(rows[v][h] + block * F::block_bytes, i, bytes), t, bytes,
                  affine[v], h);
              for (int r = 0; r < PAIRS; ++r) {
                for (int s = 0; s < STEPS; ++s) {
                  uint32_t pairs[2];
                  muser_level_pairs<F::level_bits, F::zero>(bytes[STEPS * r + s], xh, pairs);
                  a[v][r][s][h] = pairs[0];
                  a[v][r][s][h + 2] = pairs[1];
                }
              }
            }
          }
          for (int r = 0; r < PAIRS; ++r) {
            const uint32_t dim = block * F::block_values + (pair * PAIRS + r) * RUN + LANE * t;  // the lane's first
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
                    muser_mma(a[v][r][s], b + 2 * s, d[v], xh);
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
                  if (F::offsets) acc[v][c][e] -= affine[v][r][e / 2].offset * sums[e % 2];
                  acc[v][c][e] += affine[v][r][e / 2].scale * d[v][e];
                }
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
