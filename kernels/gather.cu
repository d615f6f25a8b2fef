muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    muser_bytes(table), ids, uint32_t(ids_shape[0]), out,
    blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y, gridDim.y);  // threadgroups are 1 high
