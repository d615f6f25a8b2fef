// The LM head's byte dot products in the CPU extension on AVX2 (x86-64-v3): bytedot.h's arithmetic
// for a quantized table (x as xruns.h's run records, x = unit * X per run of 16 values; the sum of
// levels times X exact in integers; unit * (scale * sum - offset * sum(X)) per run), in the frame
// of matvec.h's stream_logits with one-lane warps (lanes_cpu_serial.h), a run's 16 products per
// vector op and a row's terms kept in 8 float lanes until the end of its pass.
//
// Per run of x and pass, X becomes 16-bit integers: X = plane 0 + 256 * plane 1 for PLANES 2
// (|X| <= 2^14, float16 and bfloat16 x), or the 3 planes apart for PLANES 3 (|X| <= 2^21, float32
// x). Per table row and run, the level bytes less F::zero (F::level_bytes, the decoders every
// kernel shares) widened to 16 bits times X in pairs (vpmaddwd) are 8 exact 32-bit sums (PLANES 2:
// each below 2^24, so exact as floats too; PLANES 3: plane 0 + 256 * plane 1's and plane 2's
// apart, 65,536 * the second added in float32), multiplied by unit * scale into the row's 8 float
// sums. The float lanes of the GPUs' byte dot products sum one run at a time; here lane k holds
// products 2k and 2k + 1 of every run (vpmaddwd's pairs), the lanes summed at the end of the pass:
// the same exact integer sums, another order of the float32 ones.
// Where a format's two contiguous runs share one decode (formats.h: run_pair 16, contiguous_32) they
// take one level_bytes<32>.
// Needs matvec.h and xruns.h; AVX2 (elsewhere the extension's head is matvec.h's FloatLanes).
#pragma once
#include "matvec.h"
#include "xruns.h"

#if defined(__AVX2__)
#define MUSER_CPU_BYTE_DOTS

namespace muser {

template <typename F, int ROWS, int VROWS, int PLANES>
struct CpuByteLanes {
  static_assert(warp_lanes == 1, "a CPU thread's warp is one lane (lanes_cpu_serial.h)");
  static_assert(PLANES == 2 || PLANES == 3, "xruns.h's records");
  enum { XV = PLANES == 2 ? 1 : 3 };  // 16-bit vectors of X per run: X itself, or its planes

  // x: the records of x's runs, [n, dims / 16, XRunRecord<PLANES>::words] words.
  template <typename TableP, typename XP>
  static void add(const TableP* rows, XP x, uint32_t m0, uint32_t live, uint32_t, uint32_t dims,
                  float (*acc)[ROWS]) {
    typedef XRunRecord<PLANES> R;
    // runs per decode, values: two contiguous runs where one level_bytes<32> holds them
    enum { C = int(F::run_pair) == int(x_run_values) || F::contiguous_32 ? 2 : 1, N = x_run_values * C };
    __m256 sums[VROWS][ROWS];
    float offsets[VROWS][ROWS];
    for (int v = 0; v < VROWS; ++v) {
      for (int m = 0; m < ROWS; ++m) {
        sums[v][m] = _mm256_setzero_ps();
        offsets[v][m] = 0.0f;
      }
    }
    const __m256i zero = _mm256_set1_epi16(int16_t(F::zero));
    for (uint32_t i = 0; i < dims; i += N) {
      __m256i xs[ROWS][C][XV];
      float unit[ROWS][C], x_sum[ROWS][C];
      for (int m = 0; m < ROWS; ++m) {  // rows past n repeat row m0: their logits are never stored
        for (int d = 0; d < C; ++d) {
          const uint32_t* r = x + ((m0 + (uint32_t(m) < live ? m : 0)) * uint64_t(dims / x_run_values) + i / 16 + d) * R::words;
          __m128i planes[PLANES];
          for (int p = 0; p < PLANES; ++p) {
            planes[p] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r + R::planes + 4 * p));
          }
          if constexpr (PLANES == 2) {
            xs[m][d][0] = _mm256_add_epi16(_mm256_cvtepu8_epi16(planes[0]),
                                           _mm256_slli_epi16(_mm256_cvtepi8_epi16(planes[1]), 8));
          } else {
            xs[m][d][0] = _mm256_cvtepu8_epi16(planes[0]);
            xs[m][d][1] = _mm256_cvtepu8_epi16(planes[1]);
            xs[m][d][2] = _mm256_cvtepi8_epi16(planes[2]);
          }
          unit[m][d] = muser_f32_bits_to_float(r[R::unit]);
          x_sum[m][d] = muser_f32_bits_to_float(r[R::sum]);
        }
      }
      for (int v = 0; v < VROWS; ++v) {
        uint32_t w[N / 4];
        const Affine a = F::template level_bytes<N>(rows[v], i, w);
        for (int d = 0; d < C; ++d) {
          // from the words' registers: a 16-byte load of them would wait for their 4-byte stores
          const __m128i bytes = _mm_setr_epi32(int(w[4 * d]), int(w[4 * d + 1]), int(w[4 * d + 2]), int(w[4 * d + 3]));
          const __m256i levels = _mm256_sub_epi16(_mm256_cvtepu8_epi16(bytes), zero);
          for (int m = 0; m < ROWS; ++m) {
            __m256 dot;
            if constexpr (PLANES == 2) {
              dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(levels, xs[m][d][0]));
            } else {
              const __m256i low = _mm256_add_epi32(_mm256_madd_epi16(levels, xs[m][d][0]),
                                                   _mm256_slli_epi32(_mm256_madd_epi16(levels, xs[m][d][1]), 8));
              dot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(levels, xs[m][d][2])),
                                    _mm256_set1_ps(65536.0f), _mm256_cvtepi32_ps(low));
            }
            sums[v][m] = _mm256_fmadd_ps(dot, _mm256_set1_ps(unit[m][d] * a.scale), sums[v][m]);
            if (F::offsets) offsets[v][m] += unit[m][d] * (a.offset * x_sum[m][d]);
          }
        }
      }
    }
    for (int v = 0; v < VROWS; ++v) {
      for (int m = 0; m < ROWS; ++m) {
        __m128 s = _mm_add_ps(_mm256_castps256_ps128(sums[v][m]), _mm256_extractf128_ps(sums[v][m], 1));
        s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        acc[v][m] += _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s))) - offsets[v][m];
      }
    }
  }
};

}  // namespace muser
#endif
