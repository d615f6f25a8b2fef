muser::x_runs<PLANES>(
    x, uint32_t(x_shape[0]) * uint32_t(DIMS / muser::x_run_values), runs,
    blockIdx.x * blockDim.x + threadIdx.x);
