// The gather: ids [n] -> out [n, DIMS], one dispatch for any n.
//
// A 2-D grid, n wide (so the kernel needs no count) and DIMS / VALUES high, in threadgroups one
// row wide: thread (row, group) writes the VALUES consecutive outputs of group `group` of row
// `row`; a group beyond DIMS / VALUES (CUDA's last block of a row) is idle. Per id it reads one
// table row, DIMS / block_values * block_bytes bytes (3,744 B for Q4_K at DIMS 6,656), and writes
// DIMS values (26,624 B as float32). An id is clamped to min(unsigned(id), VOCAB - 1): a corrupt
// id reads the last row, never outside the table.
#pragma once

namespace muser {

template <typename Id>
MUSER_FN uint64_t clamp_id(Id id, uint64_t vocab) {
  uint64_t u = uint64_t(int64_t(id));
  return u < vocab ? u : vocab - 1;
}

template <typename F, int DIMS, int VOCAB, int VALUES, typename TableP, typename IdP, typename OutP>
MUSER_FN void gather(TableP table, IdP ids, OutP out, uint32_t row, uint32_t group) {
  if (group >= DIMS / VALUES) {
    return;
  }
  const uint64_t row_bytes = uint64_t(DIMS / F::block_values) * F::block_bytes;
  float v[VALUES];
  decode<F, VALUES>(table + clamp_id(ids[row], VOCAB) * row_bytes, group * VALUES, v);
  muser_store<VALUES>(out + uint64_t(row) * DIMS + group * VALUES, v);
}

}  // namespace muser
