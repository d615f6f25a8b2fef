// muser_mlx._cpu: the CPU extension's Python module (nanobind, in MLX's nanobind domain so that
// mx.array, mx.Dtype and streams cross as MLX's own).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>

#include <string>

#include "mlx/version.h"
#include "primitives.h"
#include "threads.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace {

// The vector extensions the kernels were compiled for (CMakeLists.txt: MUSER_MLX_ARCH) that this
// CPU lacks, or "" (checked before any kernel runs: module init is baseline code).
std::string missing_cpu_features() {
  std::string missing;
#if defined(MUSER_EXT_X86_64_V3) && (defined(__x86_64__) || defined(_M_X64))
  __builtin_cpu_init();
  const char* names[] = {"avx", "avx2", "fma", "f16c", "bmi", "bmi2"};
  const bool have[] = {bool(__builtin_cpu_supports("avx")),  bool(__builtin_cpu_supports("avx2")),
                       bool(__builtin_cpu_supports("fma")),  bool(__builtin_cpu_supports("f16c")),
                       bool(__builtin_cpu_supports("bmi")),  bool(__builtin_cpu_supports("bmi2"))};
  for (int k = 0; k < 6; ++k) {
    if (!have[k]) missing += (missing.empty() ? "" : ", ") + std::string(names[k]);
  }
#endif
  return missing;
}

}  // namespace

NB_MODULE(_cpu, m) {
  m.doc() = "muser_mlx's kernels (kernels/) on the CPU: the gather and the LM head as MLX primitives";
  const std::string missing = missing_cpu_features();
  if (!missing.empty()) {
    throw nb::import_error(("built for " MUSER_EXT_ARCH ", but this CPU lacks " + missing).c_str());
  }
  m.attr("arch") = MUSER_EXT_ARCH;
  // the MLX whose headers and libmlx it was built against: the package runs it only with the same
  m.attr("mlx_version") = std::to_string(MLX_VERSION_MAJOR) + "." + std::to_string(MLX_VERSION_MINOR) + "." +
                          std::to_string(MLX_VERSION_PATCH);
  m.attr("threads") = muser_ext::cpu_threads();
  nb::dict formats;
  int count;
  const muser_ext::FormatKernels* const* all = muser_ext::all_format_kernels(&count);
  bool byte_dots = false;
  for (int k = 0; k < count; ++k) {
    formats[all[k]->name] = all[k]->ggml_type;
    byte_dots = byte_dots || all[k]->byte_head[muser_ext::float32];
  }
  m.attr("formats") = formats;
  m.attr("byte_dots") = byte_dots;  // whether the quantized formats' heads have byte dot products

  m.def("gather", &muser_ext::gather, "table"_a, "ids"_a, "ggml_type"_a, "dims"_a, "dtype"_a, nb::kw_only(),
        "stream"_a = nb::none(),
        "Rows ``ids`` of ``table`` (uint8 [vocab, row_bytes], ggml type ``ggml_type``, width ``dims``) "
        "dequantized: ``ids.shape + (dims,)`` in ``dtype``; ids clamped to ``min(unsigned(id), vocab - 1)``.");
  m.def("head", &muser_ext::head, "table"_a, "x"_a, "ggml_type"_a, nb::kw_only(), "byte_dots"_a = true,
        "stream"_a = nb::none(),
        "Logits ``x @ W.T`` of ``x [n, dims]`` from the table's bytes: ``[n, vocab]`` in x's dtype; a "
        "quantized table's by the byte dot products where ``byte_dots`` and the build has them.");
}
