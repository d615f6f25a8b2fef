muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    table, ids, uint32_t(ids_shape[0]), out,
    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
