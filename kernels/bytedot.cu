// CLAIMS (backends/head.py: bytedot_launch): the warps claim their rows from the output claims
// (matvec.h: ClaimedRows), else a grid-stride.
#if CLAIMS
const muser::ClaimedRows rows = {claims};
#else
const muser::StridedRows rows = {gridDim.x * blockDim.x / 32};
#endif
muser::bytedot<muser::Format<FORMAT>, DIMS, VOCAB, ROWS, VROWS, RUNS, PLANES>(
    muser_bytes(table), x, uint32_t(x_shape[0]), out, blockIdx.x * blockDim.x + threadIdx.x, rows);
