muser::matvec<muser::Format<FORMAT>, DIMS, VOCAB, VALUES, ROWS, VROWS>(
    muser_bytes(table), x, muser::element_count(x_shape, x_ndim - 1), out, thread_position_in_grid.x, threads_per_grid.x);
