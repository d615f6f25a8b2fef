muser::gather_rows<muser::Format<FORMAT>, VALUES>(
    muser_bytes(table), ids, muser::element_count(ids_shape, ids_ndim), out, DIMS, VOCAB,
    thread_position_in_grid.x, thread_position_in_grid.y, threads_per_grid.y);
