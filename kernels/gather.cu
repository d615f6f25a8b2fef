muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    muser_bytes(table), ids, muser::id_count(&ids_shape[0], ids_ndim), out,
    blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y, gridDim.y);  // threadgroups are 1 high
