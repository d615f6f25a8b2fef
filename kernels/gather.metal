muser::gather<muser::Format<FORMAT>, DIMS, VOCAB, VALUES>(
    muser_bytes(table), ids, out, thread_position_in_grid.x, thread_position_in_grid.y);
