// CUDA dialect for the shared kernel source (the header of mx.fast.cuda_kernel; MLX's own
// header before it brings cuda_fp16.h, cuda_bf16.h and the fixed-width integer types).
#define MUSER_FN __device__ __forceinline__
#define MUSER_LOCAL

MUSER_FN float muser_f16_bits_to_float(uint16_t bits) { return __half2float(__ushort_as_half(bits)); }
MUSER_FN float muser_f32_bits_to_float(uint32_t bits) { return __uint_as_float(bits); }

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
