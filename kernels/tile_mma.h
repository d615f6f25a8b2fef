// The LM head at prefill widths on matrix units: x [n, DIMS] -> out [n, VOCAB] in x's 16-bit type H,
// out[m, r] = sum_i x[m, i] * W[r, i], a tiled matrix multiply whose table tiles are dequantized
// into shared memory, so each table byte is read once per XROWS rows of x (mma.h reads it once per
// 16 and the tiled path writes and reads a float copy of it).
//
// A threadgroup of THREADS (tile_threads, 256: 8 warps; with WARPGROUP and XROWS 256, 512) makes
// the output tile of tile_rows (128) table rows r0 .. by XROWS (32, 64, 128, or with WARPGROUP 256)
// rows of x m0 .. ; threadgroup b takes x tile b % x_tiles of table tile b / x_tiles, so the
// threadgroups that read one table tile run side by side and share it in L2.
// The table rows' bytes come into shared memory a CHUNK of values (256, or 256 bytes of a float
// format) at a time by asynchronous copies (muser_copy16_async), a chunk ahead of their use, each
// row by the DECODERS threads that decode it, each byte at its table address's offset mod 16, so
// the decoders' loads keep the widths the table's alignment gives them. x comes the same way, a
// step of XROWS x STEP_K values at a time (STEP_K: tile_k (32), or 64 at 512 threads, two tiles of
// 32), into a ring of XSTAGES steps, AHEAD = XSTAGES - 1 steps before the step that multiplies it
// (through registers where x is off a 16-byte boundary). Per step every thread decodes DECODE_N
// (16, or 8 at 512 threads and STEP_K 32) values of one row from its chunk (decode_h: the
// gather's float32 values, rounded to H as the gather into H rounds them, so the products are
// those of the tiled path's matmul) into the value buffer the step after reads; warp w multiplies
// table rows 32 (w % 4) .. + 31 by x rows XROWS / 2 * (w / 4) .. of the buffer before, 2 x XROWS / 16
// m16n8k16 multiplies (muser_mma, float32 accumulation) per 16 values, their fragments read by
// muser_ldmatrix4. WARPGROUP (CUDA compute capability 9.0): warpgroup g = w / 4 multiplies table
// rows 64 (g % 2) .. + 63 by x rows WARP_COLS (g / 2) .. instead (WARP_COLS: XROWS, or 128 of
// XROWS 256 at 512 threads), WARP_COLS / 64 m64n64k16 wgmma per 16 values (muser_wgmma64), the
// table's values as register fragments (ldmatrix), x read by the matrix unit from its stage,
// whose tile_at layout is wgmma's 64-byte swizzle (the stages start 512-byte
// aligned); issued before the decode of the next step and waited for after it, so the threads
// decode while the matrix unit multiplies. Its x comes from x_steps, x laid out a step at a time
// in the stages' order (backends/head.py: x_steps), each step by one bulk copy of one thread,
// which the stage's barrier in shared memory counts (x itself gives only n; without WARPGROUP
// x_steps is x). One barrier per step: a buffer is written a step (a chunk, an x stage AHEAD
// steps) after the step that read it. The sums go out through shared memory as H, 16 bytes per
// store along a row of out.
// Shared tiles hold rows of 32 values (64 bytes, four 16-byte chunks); chunk c of row q lies at
// chunk c ^ (q / 2 % 4) (tile_at), so the 8 rows one muser_ldmatrix4 matrix reads, and the rows the
// decoders write, meet 8 distinct groups of 4 banks. The output tile's rows of 128 values put
// chunk c of row m at c ^ (m % 8) (out_at), so a fragment's 4 rows of x meet distinct banks.
// Table rows past VOCAB decode the last row, stored nowhere; x rows past n are zeros, stored
// nowhere. DIMS is a multiple of STEP_K (backends/head.py chooses this kernel only then).
// UNROLL: steps per pass of the step loop as compiled, 1 or a chunk's (CHUNK / STEP_K), where each
// step's buffer indexes and decode offsets become constants, and with XSTAGES a power of two the
// stages' too (backends/head.py: tile_mma_unroll; measured faster for some formats at XROWS 64,
// slower for the others and at XROWS 128, faster for most at 512 threads).
// Needs from lanes_<dialect>.h: muser_dynamic_shared, muser_copy16_async, muser_copy_commit,
// muser_copy_wait, muser_group_barrier, muser_ldmatrix4, muser_store4, muser_mma,
// muser_half_products, and for WARPGROUP muser_shared_offset, muser_warp_uniform, muser_wgmma64,
// muser_wgmma_fence, muser_wgmma_commit, muser_wgmma_wait, muser_bulk_barrier_init, muser_bulk_copy,
// muser_bulk_wait;
// from the prelude: muser_load_words, muser_load_words_at2.
#pragma once
#include "matrix_unit_forms.h"

namespace muser {

enum { tile_rows = 128, tile_k = 32, tile_threads = 256 };

template <typename P>
struct pointee;
template <typename T>
struct pointee<const T*> {
  typedef T type;
};

// Offset in values of value k (a multiple of 8) of row q in a tile of rows of tile_k values.
MUSER_FN uint32_t tile_at(uint32_t q, uint32_t k) { return q * tile_k + ((k / 8) ^ (q / 2 % 4)) * 8; }

// Offset in values of table row r (a multiple of 8 plus e < 8: r - r % 8 + e) of x row m in the
// output tile of rows of tile_rows values.
MUSER_FN uint32_t out_at(uint32_t m, uint32_t r) { return m * tile_rows + ((r / 8) ^ (m % 8)) * 8 + r % 8; }

// Values i .. i + N - 1 (N = 8 or 16) of a row as H, the gather's float32 values rounded to
// nearest even, value k in half k % 2 of w[k / 2]. Where they are a float16 times a level
// (formats.h: half_scale) and the dialect multiplies float16 numbers (muser_half_products: CUDA,
// float16 x), in float16 arithmetic: the same values in fewer instructions.
template <typename F, typename H, int N, typename P>
MUSER_FN void decode_h(P row, uint32_t i, uint32_t* w) {
  if constexpr (F::half_scale && muser_half_products<H>::exact) {
    uint32_t bytes[N / 4];
    const Affine a = F::template level_bytes<N>(row, i, bytes);
    muser_half_products<H>::template of<N / 4>(bytes, F::zero, a.scale, w);
  } else {
    float v[N];
    decode<F, N>(row, i, v);
    for (int k = 0; k < N / 2; ++k) {
      const H lo = static_cast<H>(v[2 * k]), hi = static_cast<H>(v[2 * k + 1]);
      w[k] = uint32_t(*reinterpret_cast<const uint16_t*>(&lo)) | uint32_t(*reinterpret_cast<const uint16_t*>(&hi)) << 16;
    }
  }
}

template <typename F, int DIMS, int VOCAB, int XROWS, int XSTAGES, int CHUNK, int RAW, int SHARED, int UNROLL,
          int WARPGROUP, int THREADS, int STEP_K, typename TableP, typename XP, typename OutP>
MUSER_FN void tile_mma(TableP table, XP x, XP x_steps, uint32_t n, OutP out, uint32_t group, uint32_t thread) {
  typedef typename pointee<XP>::type H;
  enum {
    STEPS = DIMS / STEP_K,
    CHUNK_STEPS = CHUNK / STEP_K,
    SUBS = STEP_K / tile_k,                  // tiles of tile_k values a step
    CHUNKS = (DIMS + CHUNK - 1) / CHUNK,
    CHUNK_BYTES = CHUNK / F::block_values * F::block_bytes,
    A_VALUES = tile_rows * STEP_K,           // one buffer of table values
    B_VALUES = XROWS * STEP_K,               // one stage of x values
    X_STEP_PIECES = B_VALUES / 8,                          // 16-byte pieces of x per step
    X_PIECES = (X_STEP_PIECES + THREADS - 1) / THREADS,  // per thread (at XROWS 32, half the threads one)
    AHEAD = XSTAGES - 1,                     // steps of x in flight beyond the one multiplied
    X_GROUPS = THREADS / tile_threads,       // warpgroups' x rows: XROWS / X_GROUPS each
    DECODERS = THREADS / tile_rows,          // threads per table row, each decoding
    DECODE_N = STEP_K / DECODERS,            // values a step (16, or 8 at 512 threads and STEP_K 32)
    WARP_COLS = WARPGROUP ? XROWS / X_GROUPS : XROWS / 2,  // x rows per warp
    NT = WARP_COLS / 8,                                    // n8 tiles per warp
    ACC = (WARPGROUP ? 1 : 2) * NT * 4,                    // sums per thread: 2 x NT x 4 (mma), NT x 4 (wgmma)
    B_ALIGN = WARPGROUP ? 512 : 0,              // bytes skipped at most to align the x stages for wgmma
    BARS = WARPGROUP ? XSTAGES : 0,             // the bulk copies' barriers, 8 bytes each, after the x stages
  };
  static_assert(CHUNK % STEP_K == 0 && CHUNK % F::block_values == 0, "a chunk is whole steps and blocks");
  static_assert(STEP_K == tile_k || (THREADS == 2 * tile_threads && STEP_K == 2 * tile_k),
                "steps of a tile, or of two where 512 threads decode 16 values each");
  static_assert(AHEAD >= 1 && AHEAD < CHUNK_STEPS, "x runs ahead of the step multiplied, not past a chunk");
  static_assert(RAW % 16 == 0 && RAW >= (CHUNK_BYTES + 15) / 16 * 16 + 16, "a row's chunk and its alignment fit");
  static_assert(SHARED >= 2 * tile_rows * RAW + 2 * (2 * A_VALUES + XSTAGES * B_VALUES) + B_ALIGN + 8 * BARS &&
                    SHARED >= 2 * tile_rows * RAW + 2 * XROWS * tile_rows,
                "the shared bytes head.py asks: the buffers, and the output tile over the value buffers");
  static_assert(!WARPGROUP || WARP_COLS % 64 == 0, "wgmma multiplies 64 rows of x at a time");
  static_assert(THREADS == tile_threads || (WARPGROUP && THREADS == 2 * tile_threads),
                "warps: 256 threads; warpgroups: 256, or 512 in two groups of x rows");
  F::share_grid();
  uint8_t* raw = muser_dynamic_shared();                         // [2][tile_rows][RAW] bytes, then the value buffers
  H* a_tiles = reinterpret_cast<H*>(raw + 2 * tile_rows * RAW);  // [2][SUBS][tile_rows][tile_k]
  H* b_tiles = a_tiles + 2 * A_VALUES;                           // [XSTAGES][SUBS][XROWS][tile_k]
  if constexpr (WARPGROUP) {  // wgmma's swizzle is of shared addresses: its tiles start on 512-byte boundaries
    b_tiles += (B_ALIGN - muser_shared_offset(b_tiles) % B_ALIGN) % B_ALIGN / sizeof(H);
  }
  const uint32_t b16 = WARPGROUP ? muser_shared_offset(b_tiles) / 16 : 0;  // wgmma's address of b_tiles / 16
  uint64_t* const bars = reinterpret_cast<uint64_t*>(b_tiles + XSTAGES * B_VALUES);  // [BARS]
  if (WARPGROUP && thread == 0) {
    for (int k = 0; k < BARS; ++k) {
      muser_bulk_barrier_init(bars + k);
    }
  }
  H* out_tile = a_tiles;                                         // [XROWS][tile_rows], at the end
  const uint64_t row_bytes = uint64_t(DIMS / F::block_values) * F::block_bytes;
  const uint64_t table_bytes = uint64_t(VOCAB) * row_bytes;
  const uint32_t x_tiles = (n + XROWS - 1) / XROWS;
  const uint32_t r0 = group / x_tiles * tile_rows, m0 = group % x_tiles * XROWS;
  const uint32_t a_row = thread / DECODERS, a_k = DECODE_N * (thread % DECODERS);  // the values this thread decodes
  const bool x_aligned = (reinterpret_cast<size_t>(x) & 15) == 0;  // rows are 64-byte multiples

  // Where chunk c of this thread's row starts in the table (rows past VOCAB: the last row's).
  const uint64_t row_start = uint64_t(r0 + a_row < uint32_t(VOCAB) ? r0 + a_row : uint32_t(VOCAB) - 1) * row_bytes;
  auto chunk_start = [&](uint32_t c) { return row_start + uint64_t(c) * CHUNK_BYTES; };
  // Chunk c's bytes of the threadgroup's rows into raw buffer c % 2, asynchronously, each row by
  // the DECODERS threads that decode it: the 16-byte pieces that hold them, so each byte lies at its
  // table address's offset mod 16 (the decoders' loads are as wide as the table's alignment
  // allows). Bytes past the table are zeros.
  auto copy_chunk = [&](uint32_t c) {
    const uint32_t values = DIMS - c * CHUNK < uint32_t(CHUNK) ? DIMS - c * CHUNK : uint32_t(CHUNK);
    const uint64_t start = chunk_start(c), end = start + values / F::block_values * F::block_bytes;
    uint8_t* to = raw + (c % 2 * tile_rows + a_row) * RAW;
    for (uint32_t piece = thread % DECODERS; piece < uint32_t(RAW / 16); piece += DECODERS) {
      const uint64_t at = (start & ~uint64_t(15)) + 16 * piece;
      if (at < end) {
        muser_copy16_async(to + 16 * piece, table + at, at + 16 <= table_bytes ? 16u : uint32_t(table_bytes - at));
      }
    }
  };
  // Step s's DECODE_N values of this thread's row, from its raw chunk, as H into buffer s % 2.
  auto decode_step = [&](uint32_t s) {
    const uint32_t c = s / CHUNK_STEPS;
    const uint8_t* row = raw + (c % 2 * tile_rows + a_row) * RAW + (chunk_start(c) & 15);
    uint32_t w[DECODE_N / 2];
    decode_h<F, H, DECODE_N>(row, s % CHUNK_STEPS * STEP_K + a_k, w);
    H* a = a_tiles + s % 2 * A_VALUES + a_k / tile_k * (tile_rows * tile_k);
    for (int h = 0; h < DECODE_N / 8; ++h) {
      muser_store4(a + tile_at(a_row, a_k % tile_k + 8 * h), w + 4 * h);
    }
  };
  // This thread's pieces of x, at the same places in every step: piece thread + c THREADS is
  // values x_k .. + 7 of x row m0 + x_row + c X_PASS_ROWS, at offset x_at + c X_PASS_ROWS tile_k of
  // a stage (tile_at's swizzle repeats every 8 rows). Piece c of step s lies at x_first + s tile_k
  // + c X_PASS_ROWS DIMS, constant offsets from one address a step; a piece of a row past n (zeros)
  // reads none of its bytes.
  enum { X_PASS_ROWS = THREADS / 4 };
  const uint32_t x_row = thread / 4, x_k = thread % 4 * 8, x_at = tile_at(x_row, x_k);
  const XP x_first = x + uint64_t(m0 + x_row) * DIMS + x_k;
  H* const x_to = b_tiles + x_at;
  // x's values of step s into stage s % XSTAGES. WARPGROUP: one bulk copy of the step's bytes from
  // x_steps (backends/head.py: x_steps; x laid out a step at a time, in tile_at's order, zeros past
  // n), counted by the stage's barrier. Else asynchronously where x is 16-byte aligned, else through
  // registers (every thread's x at the same alignment: UNIFORM); rows past n are zeros.
  auto copy_x = [&](uint32_t s) {
    if constexpr (WARPGROUP) {
      if (thread == 0) {
        muser_bulk_copy(b_tiles + s % XSTAGES * B_VALUES, x_steps + (uint64_t(m0 / XROWS) * STEPS + s) * B_VALUES,
                        B_VALUES * sizeof(H), bars + s % XSTAGES);
      }
      return;
    }
    const XP from = x_first + s * tile_k;
    H* const to = x_to + s % XSTAGES * B_VALUES;
    for (int c = 0; c < X_PIECES; ++c) {
      if (X_STEP_PIECES % THREADS != 0 && thread + c * THREADS >= uint32_t(X_STEP_PIECES)) {
        break;
      }
      const bool live = m0 + x_row + c * X_PASS_ROWS < n;
      const uint8_t* piece = reinterpret_cast<const uint8_t*>(from + c * X_PASS_ROWS * DIMS);
      if (x_aligned) {
        muser_copy16_async(reinterpret_cast<uint8_t*>(to + c * X_PASS_ROWS * tile_k), piece, live ? 16u : 0u);
      } else {
        uint32_t w[4] = {0u, 0u, 0u, 0u};
        if (live) {
          muser_load_words_at2<4, true>(piece, w);
        }
        muser_store4(to + c * X_PASS_ROWS * tile_k, w);
      }
    }
  };

  const uint32_t warp = thread / 32, lane = thread % 32;
  // The warp's first table row and x row: mma, 32 table rows by XROWS / 2 x rows; wgmma, warpgroup
  // g = warp / 4 multiplies table rows 64 (g % 2) .. by x rows WARP_COLS (g / 2) .., warp w of it
  // holding 16 table rows.
  const uint32_t wr = WARPGROUP ? warp % 8 * 16 : warp % 4 * 32;
  const uint32_t wm = (WARPGROUP ? warp / 8 : warp / 4) * WARP_COLS;
  // wgmma's address / 16 of the warp's first x row in stage 0, one value for the warp's lanes
  const uint32_t wb16 = WARPGROUP ? muser_warp_uniform(b16 + wm * tile_k * sizeof(H) / 16) : 0;
  float acc[ACC];
  for (int i = 0; i < ACC; ++i) {
    acc[i] = 0.0f;
  }
  // Step s's products into acc, on the step's value buffer and x stage: mma, synchronously;
  // wgmma, issued (the fragments of A read first), to be waited for.
  auto multiply = [&](uint32_t s) {
    const H* a = a_tiles + s % 2 * A_VALUES;
    if constexpr (WARPGROUP) {
      muser_bulk_wait(bars + s % XSTAGES, s / XSTAGES % 2);  // the stage's (s / XSTAGES)-th copy
      uint32_t af[SUBS][2][4];
      for (int t = 0; t < SUBS; ++t) {
        for (int h = 0; h < 2; ++h) {
          muser_ldmatrix4(a + t * (tile_rows * tile_k) + tile_at(wr + lane % 16, 16 * h + 8 * (lane / 16)), af[t][h]);
        }
      }
      muser_wgmma_fence();
      const uint32_t stage16 = wb16 + s % XSTAGES * (B_VALUES * sizeof(H) / 16);
#pragma unroll
      for (int t = 0; t < SUBS; ++t) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          // value 16 h of tile t's x row wm + 64 q: unswizzled, as wgmma addresses
          for (int q = 0; q < WARP_COLS / 64; ++q) {
            muser_wgmma64(af[t][h], stage16 + ((t * XROWS + 64 * q) * tile_k + 16 * h) * sizeof(H) / 16,
                          acc + 32 * q, x);
          }
        }
      }
      muser_wgmma_commit();
    } else {
      const H* b = b_tiles + s % XSTAGES * B_VALUES;
      for (uint32_t kk = 0; kk < uint32_t(tile_k); kk += 16) {
        uint32_t af[2][4], bf[NT][2];
        for (int i = 0; i < 2; ++i) {  // matrix q of lane l's address: rows 8 (q % 2) .., values 8 (q / 2) ..
          muser_ldmatrix4(a + tile_at(wr + 16 * i + lane % 16, kk + 8 * (lane / 16)), af[i]);
        }
        for (int j = 0; j < NT; j += 2) {  // matrix q: x rows 8 (j + q / 2) .., values 8 (q % 2) ..
          uint32_t w[4];
          muser_ldmatrix4(b + tile_at(wm + 8 * j + lane / 16 * 8 + lane % 8, kk + lane / 8 % 2 * 8), w);
          bf[j][0] = w[0], bf[j][1] = w[1], bf[j + 1][0] = w[2], bf[j + 1][1] = w[3];
        }
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < NT; ++j) {
            muser_mma(af[i], bf[j], acc + (i * NT + j) * 4, x);
          }
        }
      }
    }
  };
  // Copies go in groups, one per step: first x of steps 0 .. AHEAD - 1 (chunk 0 with step 0's),
  // then at step s x of step s + AHEAD and, at the first step of chunk c, the bytes of chunk c + 1.
  // Waiting for all but the last AHEAD groups at the end of step s completes x of step s + 1 (with
  // WARPGROUP, x's bulk copies are not in the groups: each step waits on its stage's barrier) and,
  // since AHEAD < CHUNK_STEPS, each chunk before its first step is decoded. A raw buffer is
  // refilled a chunk after the one whose decoding it held, a value buffer a step (an x stage
  // AHEAD steps) after the step that read it.
  copy_chunk(0);
  for (uint32_t s = 0; s < uint32_t(AHEAD); ++s) {
    if (s < uint32_t(STEPS)) {
      copy_x(s);
    }
    muser_copy_commit();
  }
  muser_copy_wait<AHEAD - 1>();
  muser_group_barrier();
  decode_step(0);
  muser_group_barrier();
#pragma unroll UNROLL
  for (uint32_t s = 0; s < uint32_t(STEPS); ++s) {
    const uint32_t next = s + 1;
    if (s + AHEAD < uint32_t(STEPS)) {
      copy_x(s + AHEAD);
    }
    if (s % CHUNK_STEPS == 0 && s / CHUNK_STEPS + 1 < uint32_t(CHUNKS)) {
      copy_chunk(s / CHUNK_STEPS + 1);
    }
    muser_copy_commit();
    if constexpr (WARPGROUP) {  // the matrix unit multiplies step s while the threads decode step s + 1
      multiply(s);
    }
    if (next < uint32_t(STEPS)) {
      decode_step(next);
    }
    if constexpr (WARPGROUP) {
      muser_wgmma_wait(acc, ACC);
    } else {
      multiply(s);
    }
    muser_copy_wait<AHEAD - 1>();
    muser_group_barrier();
  }

  // acc[(i NT + j) 4 + e] (i < 2 for mma, 1 for wgmma): table row wr + 16 i + g + 8 (e / 2), x row
  // wm + 8 j + 2 t + e % 2.
  const uint32_t g = lane / 4, t = lane % 4;
  for (int i = 0; i < ACC / (4 * NT); ++i) {
    for (int j = 0; j < NT; ++j) {
      for (int e = 0; e < 4; ++e) {
        out_tile[out_at(wm + 8 * j + 2 * t + e % 2, wr + 16 * i + g + 8 * (e / 2))] =
            static_cast<H>(acc[(i * NT + j) * 4 + e]);
      }
    }
  }
  muser_group_barrier();
  for (uint32_t chunk = thread; chunk < uint32_t(XROWS * tile_rows / 8); chunk += THREADS) {
    const uint32_t m = chunk / (tile_rows / 8), c = chunk % (tile_rows / 8), first = r0 + 8 * c;
    if (m0 + m >= n || first >= uint32_t(VOCAB)) {
      continue;
    }
    const H* from = out_tile + out_at(m, 8 * c);
    OutP to = out + uint64_t(m0 + m) * VOCAB + first;
    if (VOCAB % 8 == 0) {  // rows of out 16-byte aligned, and every chunk whole
      uint32_t w[4];
      muser_load_words<4>(reinterpret_cast<const uint8_t*>(from), w);
      muser_store4(to, w);
    } else {
      for (uint32_t e = 0; e < 8 && first + e < uint32_t(VOCAB); ++e) {
        to[e] = from[e];
      }
    }
  }
}

}  // namespace muser
