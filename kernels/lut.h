// The LM head on lookup tables of x, for the formats whose every level is one byte's alone
// (formats.h: lut_bytes; TQ1_0, TQ2_0): x [n, DIMS] -> partial sums [n, SLICES, VOCAB] float32,
// which backends/head.py sums over the slices. Per block b of a table row,
//   sum_p value_p * x[m, 256 b + p] = d_b * sum_j L[b, j][byte j of the block]
//   L[b, j][v] = sum over the values p that byte j holds (value_byte(p) == j) of
//                (level of p where byte j is v) * x[m, 256 b + p]
// so a table byte costs one read of L, not the decoding of its 4 or 5 levels and their products.
//
// Threadgroup g of lut_threads (256) takes row m of x, slice s (g % SLICES) of SLICE blocks of
// every table row, and GROUP_ROWS table rows from GROUP_ROWS * (g / SLICES % PARTS). First it
// builds L for its slice in shared memory, [SLICE * block_bytes][256] float32 (entry q * 256 + v:
// byte q of the slice's bytes, value v; the scales' bytes have entries of zero): thread v decodes a
// block whose level bytes are all v by the format's own level_bytes, and adds each level times x
// to entry value_byte(p) of its column, which no other thread writes. Then each warp takes 32 table
// rows at a time: lane l reads words l, l + 32, ... of each row's slice (SLICE * block_bytes / 4
// words; a word's level bytes lie in one block, since block_bytes is 2 mod 4 with the scale last),
// adds d * (its 4 bytes' entries) into that row's sum, and a butterfly over the lanes leaves row
// r0 + l's sum in lane l, which stores it. The table is read once; L's random reads, one per
// table byte, are shared-memory wavefronts, about 3.5 per warp read for random bytes.
// Needs: DIMS an even number of 256-value blocks, SLICE even (the slices and rows whole words),
// SLICE dividing DIMS / 256 (backends/head.py: lut_fits). From lanes_<dialect>.h:
// muser_dynamic_shared, muser_group_barrier, muser_shfl_xor, muser_load_x; from the prelude:
// muser_load_words.
#pragma once
#include "formats.h"

namespace muser {

enum { lut_threads = 512, lut_warp_rows = 32 };

template <typename F, int DIMS, int VOCAB, int SLICE, int GROUP_ROWS, int LOAD_ROWS, typename TableP, typename XP, typename OutP>
MUSER_FN void lut(TableP table, XP x, OutP out, uint32_t group, uint32_t thread) {
  enum {
    B = F::block_bytes,
    BLOCKS = DIMS / F::block_values,
    SLICES = BLOCKS / SLICE,
    PARTS = (VOCAB + GROUP_ROWS - 1) / GROUP_ROWS,
    ROW_BYTES = BLOCKS * B,
    SLICE_BYTES = SLICE * B,
    WORDS = SLICE_BYTES / 4,                          // of a row's slice
    LANE_WORDS = (WORDS + muser_warp_lanes - 1) / muser_warp_lanes,
    WARPS = lut_threads / muser_warp_lanes,
  };
  static_assert(F::lut_bytes > 0 && F::block_values == 256 && B % 4 == 2 && F::lut_bytes == B - 2,
                "level bytes first, a float16 scale last, blocks 2 mod 4 bytes");
  static_assert(BLOCKS % SLICE == 0 && SLICE % 2 == 0, "whole slices of whole words");
  const uint32_t s = group % SLICES, part = group / SLICES % PARTS, m = group / SLICES / PARTS;
  float* lut = reinterpret_cast<float*>(muser_dynamic_shared());
  float* xs = lut + SLICE_BYTES * 256;  // the slice's x, SLICE * 256 float32

  // ---- L: thread v = thread % 256 writes column v of the blocks b = thread / 256 + 2k
  const uint32_t v = thread % 256, half = thread / 256;
  for (uint32_t q = half * SLICE_BYTES / 2; q < (half + 1) * SLICE_BYTES / 2; ++q) {
    lut[q * 256 + v] = 0.0f;
  }
  for (uint32_t i = thread; i < SLICE * 256; i += lut_threads) {
    muser_load_x<1>(x + uint64_t(m) * DIMS + s * (SLICE * 256) + i, xs + i);
  }
  muser_group_barrier();
  uint32_t block[(B + 3) / 4];  // a block whose every byte is v (its scale is not read)
  for (int k = 0; k < (B + 3) / 4; ++k) {
    block[k] = v * 0x01010101u;
  }
  const uint8_t* bytes = reinterpret_cast<const uint8_t*>(block);
  for (uint32_t c = 0; c < 256; c += 16) {
    uint32_t w[4];
    F::template level_bytes<16>(bytes, c, w);
    for (uint32_t k = 0; k < 16; ++k) {
      const float level = float(int((w[k / 4] >> (8 * (k % 4))) & 255u) - int(F::zero));
      const uint32_t j = F::value_byte(c + k);
      for (uint32_t b = half; b < SLICE; b += 2) {
        lut[(b * B + j) * 256 + v] += level * xs[b * 256 + c + k];
      }
    }
  }
  muser_group_barrier();

  // ---- the rows
  const uint32_t warp = thread / muser_warp_lanes, lane = thread % muser_warp_lanes;
  // word t of the lane: its first byte in the slice, and whether it is in the slice (no branch:
  // a branch there splits the warp and keeps each row's load from going out before the last's use)
  auto lane_live = [](uint32_t lane, uint32_t t) { return WORDS % muser_warp_lanes == 0 || lane + muser_warp_lanes * t < WORDS; };
  auto lane_q = [=](uint32_t lane, uint32_t t) { return lane_live(lane, t) ? 4 * (lane + muser_warp_lanes * t) : SLICE_BYTES - 4; };
  const uint32_t first = part * GROUP_ROWS, end = first + GROUP_ROWS < VOCAB ? first + GROUP_ROWS : VOCAB;
  for (uint32_t r0 = first + warp * lut_warp_rows; r0 < end; r0 += WARPS * lut_warp_rows) {
    float sum[lut_warp_rows];
    // LOAD_ROWS rows' words and scales loaded before any is used: each row is one load a lane,
    // whose latency the others' hide
#pragma unroll
    for (uint32_t h = 0; h < lut_warp_rows; h += LOAD_ROWS) {
      uint32_t w[LOAD_ROWS][LANE_WORDS], d[LOAD_ROWS][LANE_WORDS];
#pragma unroll
      for (uint32_t u = 0; u < LOAD_ROWS; ++u) {  // rows past the part's end: its last again, not stored
        const uint32_t r = r0 + h + u < end ? r0 + h + u : end - 1;
        const auto slice = table + uint64_t(r) * ROW_BYTES + s * SLICE_BYTES;
#pragma unroll
        for (uint32_t t = 0; t < LANE_WORDS; ++t) {  // a lane past the slice: its last word, times 0
          const uint32_t q = lane_q(lane, t);
          muser_load_words<1>(slice + q, &w[u][t]);
          d[u][t] = lane_live(lane, t) ? muser_load_u16(slice + (q + 2) / B * B + F::lut_bytes) : 0u;
        }
      }
#pragma unroll
      for (uint32_t u = 0; u < LOAD_ROWS; ++u) {
        sum[h + u] = 0.0f;
#pragma unroll
        for (uint32_t t = 0; t < LANE_WORDS; ++t) {
          const float* at = lut + lane_q(lane, t) * 256;
          const uint32_t b = w[u][t];
          sum[h + u] += muser_f16_bits_to_float(uint16_t(d[u][t])) *
                        ((at[b & 255u] + at[256 + ((b >> 8) & 255u)]) + (at[512 + ((b >> 16) & 255u)] + at[768 + (b >> 24)]));
        }
      }
    }
    // butterfly: at distance o, a lane keeps the half of its sums whose rows have its bit o
#pragma unroll
    for (uint32_t o = lut_warp_rows / 2; o > 0; o /= 2) {
      const bool upper = (lane & o) != 0;
#pragma unroll
      for (uint32_t i = 0; i < o; ++i) {
        const float keep = upper ? sum[i + o] : sum[i], give = upper ? sum[i] : sum[i + o];
        sum[i] = keep + muser_shfl_xor(give, o);
      }
    }
    if (r0 + lane < end) {
      out[(uint64_t(m) * SLICES + s) * VOCAB + r0 + lane] = sum[0];
    }
  }
}

}  // namespace muser
