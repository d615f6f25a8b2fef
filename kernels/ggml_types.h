// ggml's tensor type numbers (ggml.h's enum ggml_type; gguf-py's GGMLQuantizationType): the
// kernels' FORMAT constant and the index of each Format<> specialisation. tests/test_kernel_headers.py
// checks every entry against gguf-py.
#pragma once

namespace muser {
namespace ggml {
enum Type {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
  NVFP4 = 40,
};
}  // namespace ggml
}  // namespace muser
