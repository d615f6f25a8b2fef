// Shapes as the kernels read them from MLX's shape arguments.
#pragma once

namespace muser {

// The elements of an array's first ndim dimensions (ids: all of them; x [..., DIMS]: ndim - 1, its
// rows), from a pointer to the first (gather.cu: a CUDA Shape passed by value would be copied into
// each thread, an 8-int array indexed at run time in local memory).
template <typename Dims>
MUSER_FN uint32_t element_count(Dims shape, int ndim) {
  uint32_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    n *= uint32_t(shape[d]);
  }
  return n;
}

}  // namespace muser
