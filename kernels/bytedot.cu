muser::bytedot<muser::Format<FORMAT>, DIMS, VOCAB, ROWS, VROWS, RUNS, PLANES>(
    muser_bytes(table), x, uint32_t(x_shape[0]), out,
    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
