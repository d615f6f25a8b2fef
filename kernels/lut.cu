muser::lut<muser::Format<FORMAT>, DIMS, VOCAB, SLICE, GROUP_ROWS, LOAD_ROWS>(muser_bytes(table), x, out, blockIdx.x, threadIdx.x);
