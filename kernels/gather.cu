muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    muser_bytes(table), ids, out, blockIdx.x, blockIdx.y * blockDim.y + threadIdx.y);  // blocks are 1 row wide
