// The CPU dialect's operations for the LM heads, as lanes_cuda.h's, after prelude_cpu.h, for the
// tests: a warp is 32 lanes run as 32 threads (cpu_runtime.h), so cross-lane sums and the matrix
// unit run as the GPUs' do. The extension's threads take lanes_cpu_serial.h instead.
#pragma once
#include "cpu_runtime.h"
#include "lane_ops_cpu.h"

enum { muser_warp_lanes = muser_cpu::warp_lanes };  // kernels/matvec.h: warp_lanes
inline float muser_sum(float v) { return muser_cpu::warp_sum(v); }

// The matrix unit (kernels/mma.h), emulated: muser_cpu::warp_mma. H is _Float16 or
// muser_bfloat16 (the type of x); muser_level_pairs as in lanes_cuda.h, by way of float.
inline uint16_t muser_bits(float v, const _Float16*) {
  _Float16 h = _Float16(v);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
inline uint16_t muser_bits(float v, const muser_bfloat16*) { return muser_bfloat16(v).bits; }

inline float muser_from_bits(uint16_t bits, const _Float16*) { return muser_f16_bits_to_float(bits); }
inline float muser_from_bits(uint16_t bits, const muser_bfloat16*) { return muser_f32_bits_to_float(uint32_t(bits) << 16); }

template <int BITS, int ZERO, typename H>
inline void muser_level_pairs(uint32_t w, const H* tag, uint32_t* pairs) {
  for (int k = 0; k < 2; ++k) {
    const float lo = float(int((w >> (16 * k)) & 255u) - ZERO), hi = float(int((w >> (16 * k + 8)) & 255u) - ZERO);
    pairs[k] = uint32_t(muser_bits(lo, tag)) | uint32_t(muser_bits(hi, tag)) << 16;
  }
}

inline uint32_t muser_lane_xor(uint32_t v, uint32_t mask) { return muser_cpu::lane_xor(v, mask); }

template <typename H>
inline void muser_mma(const uint32_t* a, const uint32_t* b, float* d, const H* tag) {
  muser_cpu::warp_mma(a, b, d, [&](uint16_t bits) { return muser_from_bits(bits, tag); });
}

// As lanes_cuda.h's, for float16 x: each product of two float16 numbers rounded once, as the
// float32 product (exact) rounded to float16.
template <typename H>
struct muser_half_products {
  enum { exact = 0 };
};
template <>
struct muser_half_products<_Float16> {
  enum { exact = 1 };
  template <int WORDS>
  static void of(const uint32_t* bytes, uint32_t zero, float scale, uint32_t* w) {
    const _Float16* tag = nullptr;
    for (int k = 0; k < 4 * WORDS; k += 2) {
      const float lo = float(int((bytes[k / 4] >> (8 * (k % 4))) & 255u) - int(zero)) * scale;
      const float hi = float(int((bytes[k / 4] >> (8 * (k % 4) + 8)) & 255u) - int(zero)) * scale;
      w[k / 2] = uint32_t(muser_bits(lo, tag)) | uint32_t(muser_bits(hi, tag)) << 16;
    }
  }
};

// The tiled matrix multiply (kernels/tile_mma.h), as lanes_cuda.h's: the threadgroup's shared
// bytes and barrier (cpu_runtime.h: run_groups), the asynchronous copies completed by the waits
// (cpu_runtime.h: Copies; zeros past `have`), ldmatrix by muser_cpu::warp_ldmatrix4.
inline uint8_t* muser_dynamic_shared() { return muser_cpu::lane.group->shared(); }
inline void muser_copy16_async(uint8_t* dst, const uint8_t* src, uint32_t have) {
  muser_cpu::copies.issue(dst, src, have);
}
inline void muser_copy_commit() { muser_cpu::copies.commit(); }
template <int PENDING>
inline void muser_copy_wait() {
  muser_cpu::copies.wait(PENDING);
}
inline void muser_group_barrier() { muser_cpu::lane.group->barrier(); }
template <typename P>
inline void muser_store4(P* p, const uint32_t* w) {
  std::memcpy(p, w, 16);
}
template <typename H>
inline void muser_ldmatrix4(const H* p, uint32_t* r) {
  muser_cpu::warp_ldmatrix4(reinterpret_cast<const uint8_t*>(p), r);
}

// The warpgroup matrix multiply (kernels/tile_mma.h with WARPGROUP), as lanes_cuda.h's: shared
// offsets from the threadgroup's shared bytes, each warp's share of the multiply by
// muser_cpu::warp_wgmma64 when it is issued (so the fences and the wait order nothing here).
inline uint32_t muser_shared_offset(const void* p) {
  return uint32_t(static_cast<const uint8_t*>(p) - muser_cpu::lane.group->shared());
}
inline uint32_t muser_warp_uniform(uint32_t v) { return v; }  // every lane holds v already
inline void muser_wgmma_fence() {}
inline void muser_wgmma_commit() {}
inline void muser_wgmma_wait(float*, int) {}
template <typename H>
inline void muser_wgmma64(const uint32_t* a, uint32_t b16, float* d, const H* tag) {
  muser_cpu::warp_wgmma64(a, muser_cpu::lane.group->shared(), 16 * b16, d,
                          [&](uint16_t bits) { return muser_from_bits(bits, tag); });
}
// Bulk copies (cpu_runtime.h: BulkCopies): written when a thread waits on their barrier.
inline void muser_bulk_barrier_init(uint64_t*) {}
inline void muser_bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  muser_cpu::lane.group->bulk.issue(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes, bar);
}
inline void muser_bulk_wait(uint64_t* bar, uint32_t) { muser_cpu::lane.group->bulk.wait(bar); }
