// The gather: ids [...] -> out [..., DIMS], one dispatch for any count and shape of ids (read
// from the ids array: element_count of its shape; the ids are row-contiguous).
//
// A 2-D grid: thread (x, y) produces the VALUES consecutive outputs of group x (of DIMS / VALUES)
// in rows y, y + row_step, ... (row_step = the grid's height). x beyond the groups is idle.
// Per id it reads one table row, DIMS / block_values * block_bytes bytes (3,744 B for Q4_K at
// DIMS 6,656), and writes DIMS values (26,624 B as float32). An id is clamped to
// min(unsigned(id), VOCAB - 1): a corrupt id reads the last row, never outside the table.
#pragma once
#include "formats.h"

namespace muser {

template <typename Id>
MUSER_FN uint64_t clamp_id(Id id, uint64_t vocab) {
  uint64_t u = uint64_t(int64_t(id));
  return u < vocab ? u : vocab - 1;
}

// dims values per row and vocab rows come at run time: the GPU dialects pass their compiled-in
// DIMS and VOCAB (gather.metal, gather.cu), the CPU extension a table's (one build for all).
template <typename F, int VALUES, typename TableP, typename IdP, typename OutP>
MUSER_FN void gather_rows(TableP table, IdP ids, uint32_t n_ids, OutP out, uint32_t dims, uint64_t vocab,
                          uint32_t group, uint32_t first_row, uint32_t row_step) {
  if (group >= dims / VALUES) {
    return;
  }
  const uint64_t row_bytes = uint64_t(dims / F::block_values) * F::block_bytes;
  // A warp's 32 lanes decode 32 * VALUES consecutive values of one row; where that span divides
  // the block, they all read one block, at one alignment (formats.h: UNIFORM).
  constexpr bool one_block = F::block_values % (32 * VALUES) == 0;
  for (uint32_t row = first_row; row < n_ids; row += row_step) {
    float v[VALUES];
    decode<F, VALUES, one_block>(table + clamp_id(ids[row], vocab) * row_bytes, group * VALUES, v);
    muser_store<VALUES>(out + uint64_t(row) * dims + group * VALUES, v);
  }
}

}  // namespace muser
