muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    muser_bytes(table), ids, uint32_t(ids_shape[0]), out,
    thread_position_in_grid.x, thread_position_in_grid.y, threads_per_grid.y);
