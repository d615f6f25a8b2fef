muser::matvec<muser::Format<FORMAT>, DIMS, VOCAB, VALUES, ROWS, VROWS>(
    muser_bytes(table), x, muser::element_count(&x_shape[0], x_ndim - 1), out,
    blockIdx.x * blockDim.x + threadIdx.x, gridDim.x * blockDim.x);
