muser::matvec<muser::Format<FORMAT>, DIMS, VOCAB, VALUES, ROWS, VROWS>(
    table, x, uint32_t(x_shape[0]), out, thread_position_in_grid.x, threads_per_grid.x);
