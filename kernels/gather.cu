muser::gather_rows<muser::Format<FORMAT>, VALUES>(
    muser_bytes(table), ids, muser::element_count(&ids_shape[0], ids_ndim), out, DIMS, VOCAB,
    blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y, gridDim.y);  // threadgroups are 1 high
