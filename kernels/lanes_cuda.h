// The CUDA dialect's operations for the LM heads (matvec.h, xruns.h, bytedot.h, mma.h, tile_mma.h),
// after prelude_cuda.h: cross-lane sums, loads of x, byte dot products, the matrix units and the
// asynchronous copies.
#pragma once

MUSER_FN uint32_t muser_float_bits(float v) { return __float_as_uint(v); }

// Bytes of a and b (a's are 0-3) picked by the nibbles of s, one per result byte (PRMT).
MUSER_FN uint32_t muser_byte_perm(uint32_t a, uint32_t b, uint32_t s) { return __byte_perm(a, b, s); }

// c + the sum over k = 0..3 of byte k of a (unsigned) times byte k of b (signed if SIGNED): dp4a.
template <bool SIGNED>
MUSER_FN int muser_dot4(uint32_t a, uint32_t b, int c) {
  int d;
  if (SIGNED) {
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  } else {
    asm("dp4a.u32.u32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  }
  return d;
}

// N consecutive values of x (float, half or bfloat16) as float32: 16-byte loads where aligned
// (x may be a view at any element offset).
template <int N, typename X>
MUSER_FN void muser_load_x(const X* p, float* v) {
  const int per = 16 / int(sizeof(X));
  if (N % per == 0 && (reinterpret_cast<size_t>(p) & 15) == 0) {
    for (int c = 0; c < N; c += per) {
      uint4 chunk = *reinterpret_cast<const uint4*>(p + c);
      const X* xs = reinterpret_cast<const X*>(&chunk);
      for (int k = 0; k < per; ++k) {
        v[c + k] = float(xs[k]);
      }
    }
  } else {
    for (int k = 0; k < N; ++k) {
      v[k] = float(p[k]);
    }
  }
}

enum { muser_warp_lanes = 32 };  // kernels/matvec.h: warp_lanes

// The grid formats' grids in shared memory (format_iq_grid.h; docs/performance.md, "Grid
// memory"): a head kernel's warps stream table rows for their whole life, so the copy a
// threadgroup makes at its start serves all its rows, and a warp's 32 reads of unrelated grid
// points meet 32 banks rather than up to 32 cache lines.
#define MUSER_SHARED_GRIDS
template <int WORDS, int TAG>
MUSER_FN uint32_t* muser_shared_words() {
  // one array per WORDS and TAG in a kernel (a generated array's copy: its <name>_tag,
  // format_iq_grid.h; 0: IQ3_XXS's signed points, format_iq3_points.h, computed rather than copied),
  // 16-byte aligned: an IQ2 grid point's two words load as one
  __shared__ __align__(16) uint32_t words[WORDS];
  return words;
}
// Every thread of the threadgroup copies its share of the words, then waits for the others'.
MUSER_FN void muser_share_words(const uint32_t* from, uint32_t* to, uint32_t words) {
  for (uint32_t i = threadIdx.x; i < words; i += blockDim.x) {
    to[i] = from[i];
  }
  __syncthreads();
}
// The same for words computed, to[i] = Words::word(i).
template <typename Words>
MUSER_FN void muser_fill_words(uint32_t* to, uint32_t words) {
  for (uint32_t i = threadIdx.x; i < words; i += blockDim.x) {
    to[i] = Words::word(i);
  }
  __syncthreads();
}

// Sum over the 32 lanes of a warp (all lanes active), every lane gets the result.
MUSER_FN float muser_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The matrix unit (kernels/mma.h), in the 16-bit type H of its x: __half or __nv_bfloat16.
// muser_level_pairs<BITS, ZERO>(w, H*, pairs): bytes q0..q3 of w (each below 2^BITS) as levels
// q - ZERO in H, two per word, low half first: pairs[0] = (q0, q1), pairs[1] = (q2, q3). Exact:
// the byte goes into the mantissa of 1024 (float16) or 128 (bfloat16, BITS <= 7) by one byte
// permute per pair and the bias comes off in one paired subtraction; 8-bit bytes in bfloat16 go
// through float32.
template <int BITS, int ZERO>
MUSER_FN void muser_level_pairs(uint32_t w, const __half*, uint32_t* pairs) {
  const __half2 bias = __half2half2(__ushort_as_half(uint16_t(0x6400 + ZERO)));  // 1024 + ZERO
  for (int k = 0; k < 2; ++k) {
    uint32_t biased = __byte_perm(w, 0x64u, 0x4140u + 0x0202u * k);  // halves 0x64qq: 1024 + q
    __half2 level = __hsub2(*reinterpret_cast<__half2*>(&biased), bias);
    pairs[k] = *reinterpret_cast<uint32_t*>(&level);
  }
}
template <int BITS, int ZERO>
MUSER_FN void muser_level_pairs(uint32_t w, const __nv_bfloat16*, uint32_t* pairs) {
  for (int k = 0; k < 2; ++k) {
    __nv_bfloat162 level;
    if constexpr (BITS <= 7) {
      const __nv_bfloat162 bias = __bfloat162bfloat162(__ushort_as_bfloat16(uint16_t(0x4300 + ZERO)));  // 128 + ZERO
      uint32_t biased = __byte_perm(w, 0x43u, 0x4140u + 0x0202u * k);  // 0x43qq: 128 + q
      level = __hsub2(*reinterpret_cast<__nv_bfloat162*>(&biased), bias);
    } else {
      const float lo = __uint_as_float(muser_mantissa_byte(w, 2 * k)) - (8388608.0f + ZERO);
      const float hi = __uint_as_float(muser_mantissa_byte(w, 2 * k + 1)) - (8388608.0f + ZERO);
      level = __floats2bfloat162_rn(lo, hi);
    }
    pairs[k] = *reinterpret_cast<uint32_t*>(&level);
  }
}

// The word of lane (this lane ^ mask) of the warp (all lanes active).
MUSER_FN uint32_t muser_lane_xor(uint32_t v, uint32_t mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

// d[0..3] += A B, one warp-wide m16n8k16 multiply (PTX mma.sync, float32 accumulation); all 32
// lanes take part. Lane (g, t) = (lane / 4, lane % 4) holds, two H per word, low half first:
//   a[0] A[g][2t, 2t+1]   a[1] A[g+8][2t, 2t+1]   a[2] A[g][2t+8, 2t+9]   a[3] A[g+8][2t+8, 2t+9]
//   b[0] B[2t, 2t+1][g]   b[1] B[2t+8, 2t+9][g]
//   d[0], d[1] D[g][2t, 2t+1]   d[2], d[3] D[g+8][2t, 2t+1]
#define MUSER_MMA(H_PTX)                                                                                 \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." H_PTX "." H_PTX ".f32 {%0, %1, %2, %3}, "        \
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"                                          \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                         \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
MUSER_FN void muser_mma(const uint32_t* a, const uint32_t* b, float* d, const __half*) { MUSER_MMA("f16"); }
MUSER_FN void muser_mma(const uint32_t* a, const uint32_t* b, float* d, const __nv_bfloat16*) { MUSER_MMA("bf16"); }

// The tiled matrix multiply's values in x's type H where a format's are a float16 times a level
// (kernels/tile_mma.h: decode_h; formats.h: half_scale): exact says whether of() gives them for
// H. of<WORDS>(bytes, zero, scale, w): the 4 WORDS values scale * (byte k - zero) of
// bytes[0 .. WORDS - 1] as float16,
// value k in half k % 2 of w[k / 2], each rounded once to nearest even. A byte permute puts two
// bytes under float16's exponent of 1024 (0x64 in the high byte: 1024 + byte, exact), a subtraction
// gives their levels exactly and a multiply, not contracted, rounds their products: 3
// instructions per two values, where float32 takes 7 (a permute, a subtraction and a multiply per
// value, a conversion per two).
template <typename H>
struct muser_half_products {
  enum { exact = 0 };
};
template <>
struct muser_half_products<__half> {
  enum { exact = 1 };
  template <int WORDS>
  static MUSER_FN void of(const uint32_t* bytes, uint32_t zero, float scale, uint32_t* w) {
    const __half2 s = __float2half2_rn(scale), bias = __float2half2_rn(1024.0f + float(zero));
    for (int c = 0; c < WORDS; ++c) {
      for (int h = 0; h < 2; ++h) {
        const uint32_t biased = __byte_perm(bytes[c], 0x64646464u, h ? 0x4342u : 0x4140u);
        const __half2 v = __hmul2_rn(__hsub2(*reinterpret_cast<const __half2*>(&biased), bias), s);
        w[2 * c + h] = *reinterpret_cast<const uint32_t*>(&v);
      }
    }
  }
};

// The tiled matrix multiply (kernels/tile_mma.h): the threadgroup's dynamic shared memory (the
// launch's shared bytes, 16-byte aligned), asynchronous 16-byte copies into it, the threadgroup's
// barrier, 16-byte stores, and fragments read from shared memory.
MUSER_FN uint8_t* muser_dynamic_shared() {
  extern __shared__ __align__(16) uint8_t muser_dynamic_bytes[];
  return muser_dynamic_bytes;
}
// 16 bytes to shared dst from global src (both 16-byte aligned), of which the first have come
// from src and the rest are zeros (cp.async, L2 only: the table is read once per threadgroup).
MUSER_FN void muser_copy16_async(uint8_t* dst, const uint8_t* src, uint32_t have) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;"
               :
               : "r"(uint32_t(__cvta_generic_to_shared(dst))), "l"(src), "r"(have)
               : "memory");
}
// The copies issued since the last commit, as one group; wait until at most PENDING groups are
// in flight (this thread's; a barrier after makes every thread's visible).
MUSER_FN void muser_copy_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int PENDING>
MUSER_FN void muser_copy_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}
MUSER_FN void muser_group_barrier() { __syncthreads(); }
// w[0..3] to the 16-byte-aligned p (shared or global memory): one store.
template <typename P>
MUSER_FN void muser_store4(P* p, const uint32_t* w) {
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}
// Four 8 x 8 matrices of 16-bit values from shared memory (ldmatrix .x4): lane l gives the
// address of row l % 8 of matrix l / 8 (8 consecutive values, 16-byte aligned); lane (g, t) gets
// in r[q] values 2t, 2t+1 of row g of matrix q, low half first, as muser_mma's fragments take them.
template <typename H>
MUSER_FN void muser_ldmatrix4(const H* p, uint32_t* r) {
  const uint32_t address = uint32_t(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
}

// The warpgroup matrix multiply (kernels/tile_mma.h with WARPGROUP; PTX wgmma, compute capability
// 9.0 compiled as sm_90a, which MLX's NVRTC does for 9.0): the four warps of a warpgroup issue
// one m64n64k16 multiply together, asynchronously. Warp w % 4 of the warpgroup gives A's rows
// 16 (w % 4) .. + 15 in a[0..3], mma.sync's A fragment (muser_mma); B is 64 rows of 16 values
// (x rows, K contiguous) read by the matrix unit from shared memory: b16 is the shared address
// (muser_shared_offset) / 16 of value k0 of row 0 of a tile of rows of 32 values (64 bytes), 512-byte
// aligned, whose 16-byte chunk c of row q lies at chunk c ^ (q / 2 % 4) (kernels/tile_mma.h:
// tile_at; wgmma's 64-byte swizzle), k0 a multiple of 16; tag: a pointer of B's 16-bit type. d[4 j + e] += D[16 (w % 4) + g + 8 (e / 2)][8 j + 2 t + e % 2], lane
// (g, t) = (lane / 4, lane % 4), summed in float32. Between muser_wgmma_fence (after the
// registers a and d were last written) and muser_wgmma_wait (after muser_wgmma_commit) neither
// may be touched, nor B's shared memory written. B is written by bulk copies (muser_bulk_copy,
// below): shared memory the threads wrote (cp.async included) would need a proxy fence
// (fence.proxy.async) before the matrix unit reads it.
MUSER_FN uint32_t muser_shared_offset(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
// v, which every lane of the warp holds, read from lane 0: ptxas then keeps it, and what is
// worked out from it, in uniform registers (wgmma's descriptors: two uniform moves a multiply,
// where a value of each lane's own took four instructions, two of them moves to uniform registers).
MUSER_FN uint32_t muser_warp_uniform(uint32_t v) { return __shfl_sync(0xFFFFFFFFu, v, 0); }
MUSER_FN void muser_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MUSER_FN void muser_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits for every multiply this warpgroup committed; d's registers are ordered after it.
MUSER_FN void muser_wgmma_wait(float* d, int n) {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
  for (int i = 0; i < n; ++i) {
    asm volatile("" : "+f"(d[i])::"memory");
  }
}
// The shared-memory matrix descriptor of B: start address / 16 (bits 0-13; shared offsets are
// under 256 KB, so b16 < 2^14 and the leading byte offset adds without a carry), leading byte
// offset 16 / 16 (bits 16-29, unused by a K-major swizzled B), stride byte offset 512 / 16 between
// groups of 8 rows (bits 32-45), 64-byte swizzle (2 in bits 62-63). An add, so that a caller's
// b16 = base + constant folds into one add per multiply.
MUSER_FN uint64_t muser_wgmma_b(uint32_t b16) {
  return uint64_t(b16 + (1u << 16)) | uint64_t(512 >> 4) << 32 | uint64_t(2) << 62;
}
#define MUSER_WGMMA(H_PTX)                                                                                    \
  asm volatile(                                                                                               \
      "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                                              \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." H_PTX "." H_PTX " "                                       \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
      "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"        \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),       \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]),            \
        "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),            \
        "+f"(d[30]), "+f"(d[31])                                                                              \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(muser_wgmma_b(b16)))
MUSER_FN void muser_wgmma64(const uint32_t* a, uint32_t b16, float* d, const __half*) { MUSER_WGMMA("f16"); }
MUSER_FN void muser_wgmma64(const uint32_t* a, uint32_t b16, float* d, const __nv_bfloat16*) { MUSER_WGMMA("bf16"); }

// Bulk copies into shared memory (kernels/tile_mma.h with WARPGROUP: x's steps): one thread copies
// `bytes` (a multiple of 16, both ends 16-byte aligned) by a 1-D bulk copy (cp.async.bulk), whose
// bytes a barrier in shared memory (mbarrier, 8 bytes) counts; the threads that read them wait
// for the barrier's phase. Its writes are the async proxy's, as wgmma's reads are, so no proxy
// fence stands between them. A barrier completes a phase per copy: the k-th copy on it (from 0)
// is waited for with parity k % 2. Initialized by one thread, then a threadgroup barrier.
MUSER_FN void muser_bulk_barrier_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\nfence.mbarrier_init.release.cluster;" ::"r"(
                   muser_shared_offset(bar))
               : "memory");
}
MUSER_FN void muser_bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  const uint32_t b = muser_shared_offset(bar);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   muser_shared_offset(dst)),
               "l"(src), "r"(bytes), "r"(b)
               : "memory");
}
MUSER_FN void muser_bulk_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t b = muser_shared_offset(bar);
  for (uint32_t done = 0; !done;) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(done)
                 : "r"(b), "r"(parity)
                 : "memory");
  }
}
