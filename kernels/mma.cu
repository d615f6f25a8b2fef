muser::mma_matvec<muser::Format<FORMAT>, DIMS, VOCAB, PARTS, VTILES, XTILES, WORD_ROWS, PAIRS>(
    muser_bytes(table), xh, x_sums, uint32_t(xh_shape[1]), out,
    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
