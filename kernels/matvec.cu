muser::matvec<muser::Format<FORMAT>, DIMS, VOCAB, VALUES, ROWS, VROWS>(
    table, x, uint32_t(x_shape[0]), out,
    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
