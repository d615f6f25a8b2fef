// One format's CPU kernels: the shared templates kernels/gather.h (gather_rows) and, for the LM
// head, kernels/matvec.h's frame with its FloatLanes (matvec_rows) for a float format, and on AVX2
// for a quantized one kernels/bytedot_cpu.h's CpuByteLanes, the byte dot products on x's run records
// (kernels/xruns.h), in the CPU dialect (prelude_cpu.h) with one-lane warps (lanes_cpu_serial.h),
// over a range of rows. CMakeLists.txt generates one translation unit per
// Format<ggml::NAME> in kernels/format_*.h (format_kernels.cpp.in), which includes its decoder and
// defines that format's FormatKernels with MUSER_EXT_FORMAT_KERNELS. Those units are compiled for
// the target's vector extensions and include nothing of MLX or the standard library beyond
// <cstdint>/<cstring> (kernel_table.h says why).
#pragma once
#include "prelude_cpu.h"
#include "lanes_cpu_serial.h"
#include "bytedot_cpu.h"
#include "gather.h"
#include "kernel_table.h"

namespace muser_ext {
namespace {

template <int TYPE>
struct Element;  // FloatType -> its C++ type in the CPU dialect (MLX's float16 and bfloat16 bits)
template <>
struct Element<float32> {
  typedef float type;
};
template <>
struct Element<float16> {
  typedef _Float16 type;
};
template <>
struct Element<bfloat16> {
  typedef muser_bfloat16 type;
};

// Values per decode: a whole run of 16 (every quantized format's rows are whole runs), or one
// value at a time for a float format whose dims 16 does not divide.
template <typename F, typename Kernel>
void by_values(uint32_t dims, Kernel kernel) {
  if (F::block_values % 16 == 0 || dims % 16 == 0) {
    kernel.template operator()<16>();
  } else if constexpr (F::block_values % 16 != 0) {
    kernel.template operator()<1>();
  }
}

template <typename F, int TYPE>
void gather_range(const GatherJob& job, uint32_t first, uint32_t end) {
  typedef typename Element<TYPE>::type T;
  by_values<F>(job.dims, [&]<int VALUES>() {
    T* out = static_cast<T*>(job.out);
    for (uint32_t row = first; row < end; ++row) {  // thread (group, row) of the GPU grid, a row at a time
      for (uint32_t group = 0; group < job.dims / VALUES; ++group) {
        muser::gather_rows<F, VALUES>(job.table, job.ids + row, 1u, out + uint64_t(row) * job.dims, job.dims,
                                      job.vocab, group, 0u, 1u);
      }
    }
  });
}

// Table rows per warp (VROWS) and rows of x per pass (ROWS: 1, 2, or 4 with passes of 4 beyond;
// a warp's table rows stay in L1 between passes).
enum { head_vrows = 4 };

// A quantized format's levels are bytes (formats.h: ByteLevels): where the target has the vector
// byte dot products, its head takes them.
template <typename F>
constexpr bool byte_dots =
#ifdef MUSER_CPU_BYTE_DOTS
    requires { F::level_bits; };
#else
    false;
#endif

// The head's lanes (matvec.h's stream_logits) by rows of x per pass.
template <typename F, int VALUES>
struct FloatLanesOf {
  template <int ROWS>
  using Lanes = muser::FloatLanes<F, VALUES, ROWS, head_vrows>;
};
#ifdef MUSER_CPU_BYTE_DOTS
template <typename F, int PLANES>
struct ByteLanesOf {
  template <int ROWS>
  using Lanes = muser::CpuByteLanes<F, ROWS, head_vrows, PLANES>;
};
#endif

// x's run records in byte planes (xruns.h): 2 for 16-bit x, 3 for float32 x.
template <int TYPE>
constexpr int planes = TYPE == float32 ? 3 : 2;

template <int TYPE>
void head_runs(const HeadJob& job) {
  typedef typename Element<TYPE>::type X;
  const uint32_t runs = job.n * (job.dims / muser::x_run_values);
  for (uint32_t run = 0; run < runs; ++run) {
    muser::x_runs<planes<TYPE>>(static_cast<const X*>(job.x), runs, job.runs, run);
  }
}

// Rows of x per pass (ROWS: 1, 2, or 4 with passes of 4 beyond) of a head's Lanes, table rows
// [first, end).
template <typename F, typename X, template <int> class Lanes, typename XP>
void head_rows(const HeadJob& job, XP x, uint32_t first, uint32_t end) {
  const uint32_t warps = (job.vocab + head_vrows - 1) / head_vrows;  // one warp per head_vrows rows
  auto run = [&]<int ROWS>() {
    for (uint32_t w = first / head_vrows; w * head_vrows < end; ++w) {
      muser::stream_logits<F, ROWS, head_vrows, Lanes<ROWS>, const uint8_t*>(job.table, x, job.n, static_cast<X*>(job.out),
                                                                           job.dims, job.vocab, w, warps);
    }
  };
  if (job.n == 1) {
    run.template operator()<1>();
  } else if (job.n == 2) {
    run.template operator()<2>();
  } else {
    run.template operator()<4>();
  }
}

template <typename F, int TYPE>
void head_range(const HeadJob& job, uint32_t first, uint32_t end) {
  typedef typename Element<TYPE>::type X;
  by_values<F>(job.dims, [&]<int VALUES>() {
    head_rows<F, X, FloatLanesOf<F, VALUES>::template Lanes>(job, static_cast<const X*>(job.x), first, end);
  });
}

// byte_head's ranges where the format and the target have them, else nullptr.
template <typename F, int TYPE>
constexpr HeadRange byte_head_range() {
#ifdef MUSER_CPU_BYTE_DOTS
  if constexpr (byte_dots<F>) {
    return [](const HeadJob& job, uint32_t first, uint32_t end) {
      typedef typename Element<TYPE>::type X;
      head_rows<F, X, ByteLanesOf<F, planes<TYPE>>::template Lanes>(job, static_cast<const uint32_t*>(job.runs),
                                                                     first, end);
    };
  }
#endif
  return nullptr;
}

template <typename F, int TYPE>
constexpr HeadRuns byte_head_runs() {
  return byte_dots<F> ? head_runs<TYPE> : nullptr;
}

template <typename F>
FormatKernels kernels_of(const char* name, int ggml_type) {
  return FormatKernels{name,
                       ggml_type,
                       F::block_values,
                       F::block_bytes,
                       head_vrows,
                       {gather_range<F, float32>, gather_range<F, float16>, gather_range<F, bfloat16>},
                       {head_range<F, float32>, head_range<F, float16>, head_range<F, bfloat16>},
                       {byte_head_range<F, float32>(), byte_head_range<F, float16>(), byte_head_range<F, bfloat16>()},
                       {byte_head_runs<F, float32>(), byte_head_runs<F, float16>(), byte_head_runs<F, bfloat16>()},
                       {muser::XRunRecord<planes<float32>>::words, muser::XRunRecord<planes<float16>>::words,
                        muser::XRunRecord<planes<bfloat16>>::words}};
}

}  // namespace
}  // namespace muser_ext

// The FormatKernels of Format<ggml::NAME>, as muser_ext::kernels_NAME() (kernel_registry.cpp.in).
#define MUSER_EXT_FORMAT_KERNELS(NAME)                                                                \
  namespace muser_ext {                                                                               \
  const FormatKernels& kernels_##NAME() {                                                             \
    static const FormatKernels k = kernels_of<muser::Format<muser::ggml::NAME>>(#NAME, muser::ggml::NAME); \
    return k;                                                                                         \
  }                                                                                                   \
  }
