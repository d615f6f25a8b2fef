muser::x_runs<PLANES>(
    x, muser::element_count(&x_shape[0], x_ndim - 1) * uint32_t(DIMS / muser::x_run_values), runs,
    blockIdx.x * blockDim.x + threadIdx.x);
