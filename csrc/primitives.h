// The extension's MLX operations: the gather (rows of a quantized table, dequantized) and the LM
// head (logits x @ W.T from the table's bytes), each a Primitive evaluated on the CPU by the
// format's kernels from kernels/ (kernel_table.h). Lazy, in MLX's graph, traceable by mx.compile.
#pragma once
#include "mlx/ops.h"
#include "mlx/primitives.h"

#include "kernel_table.h"

namespace muser_ext {
namespace mx = mlx::core;

// table uint8 [vocab, row_bytes] of ggml type ggml_type and width dims; ids of any integer dtype
// and shape -> ids.shape + [dims] in dtype (float32, float16, bfloat16). An id is clamped to
// min(unsigned(id), vocab - 1), as kernels/gather.h does. Raises std::invalid_argument (Python's
// ValueError) for a type this build lacks, a table whose shape does not match, a non-integer
// ids dtype (TypeError's message) or another output dtype, or a GPU stream.
mx::array gather(const mx::array& table, const mx::array& ids, int ggml_type, int dims, mx::Dtype dtype,
                 mx::StreamOrDevice s = {});

// x [n, dims] (float32, float16 or bfloat16) -> logits [n, vocab] in x's dtype, accumulated in
// float32: for a quantized table where byte_dots and the build has them, by the byte dot products
// (kernels/bytedot_cpu.h: x as integers per run of 16 values, kernels/xruns.h), else from the exact
// dequantized values (kernels/matvec.h). Its vjp for x is g @ W (the table dequantized in g's
// dtype by gather).
mx::array head(const mx::array& table, const mx::array& x, int ggml_type, bool byte_dots = true,
               mx::StreamOrDevice s = {});

class Gather : public mx::Primitive {
 public:
  Gather(mx::Stream stream, const FormatKernels& kernels, int dims) : mx::Primitive(stream), k_(kernels), dims_(dims) {}
  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;
  const char* name() const override { return "MuserGather"; }
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  const FormatKernels& k_;
  int dims_;
};

class Head : public mx::Primitive {
 public:
  Head(mx::Stream stream, const FormatKernels& kernels, bool byte_dots)
      : mx::Primitive(stream), k_(kernels), byte_dots_(byte_dots) {}
  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  void eval_gpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override;
  std::vector<mx::array> vjp(const std::vector<mx::array>& primals, const std::vector<mx::array>& cotangents,
                             const std::vector<int>& argnums, const std::vector<mx::array>& outputs) override;
  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override;
  const char* name() const override { return "MuserHead"; }
  bool is_equivalent(const mx::Primitive& other) const override;

 private:
  const FormatKernels& k_;
  bool byte_dots_;
};

}  // namespace muser_ext
