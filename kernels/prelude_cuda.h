// CUDA dialect for the shared kernel source (the header of mx.fast.cuda_kernel; MLX's own
// header before it brings cuda_fp16.h, cuda_bf16.h and the fixed-width integer types).
#define MUSER_FN __device__ __forceinline__
#define MUSER_LOCAL

MUSER_FN float muser_f16_bits_to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
MUSER_FN float muser_f32_bits_to_float(uint32_t bits) { return __uint_as_float(bits); }

// 0x4B000000 | byte k of w (k = 0..3): the byte in the mantissa of 2^23, one byte permute (PRMT).
MUSER_FN uint32_t muser_mantissa_byte(uint32_t w, int k) { return __byte_perm(w, 0x4B000000u, 0x7540u | k); }

// W = 1, 2 or 4 little-endian words from p, aligned to 4W bytes: one load instruction.
template <int W>
struct muser_words;
template <>
struct muser_words<1> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) { w[0] = *reinterpret_cast<const uint32_t*>(p); }
};
template <>
struct muser_words<2> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) {
    uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  }
};
template <>
struct muser_words<4> {
  template <typename P>
  static MUSER_FN void load(P p, uint32_t* w) {
    uint4 v = *reinterpret_cast<const uint4*>(p);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  }
};

template <int W, typename P>
MUSER_FN void muser_load_words(P p, uint32_t* w) { muser_words<W>::load(p, w); }

template <typename P>
MUSER_FN uint32_t muser_load_u16(P p) { return *reinterpret_cast<const uint16_t*>(p); }

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

template <int N, typename T>
MUSER_FN void muser_store(T* dst, const float* v) {
  for (int k = 0; k < N; ++k) {
    dst[k] = static_cast<T>(v[k]);
  }
}

// float32 out: 16-byte stores where the row offset allows (the output buffer is aligned).
template <int N>
MUSER_FN void muser_store(float* dst, const float* v) {
  if (N % 4 == 0 && (reinterpret_cast<size_t>(dst) & 15) == 0) {
    for (int k = 0; k < N; k += 4) {
      *reinterpret_cast<float4*>(dst + k) = make_float4(v[k], v[k + 1], v[k + 2], v[k + 3]);
    }
  } else {
    for (int k = 0; k < N; ++k) {
      dst[k] = v[k];
    }
  }
}

// Sum over the 32 lanes of a warp (all lanes active), every lane gets the result.
MUSER_FN float muser_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}
