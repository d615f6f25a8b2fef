muser::tile_mma<muser::Format<FORMAT>, DIMS, VOCAB, XROWS, XSTAGES, CHUNK, RAW, SHARED, UNROLL, WARPGROUP, THREADS,
                STEP_K>(muser_bytes(table), x, x_steps, muser::element_count(&x_shape[0], x_ndim - 1), out, blockIdx.x,
                        threadIdx.x);
