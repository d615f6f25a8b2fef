// What the grid (codebook) formats share: a group of values is a point of a grid
// (kernels/iq*_grid.h, generated from gguf-py's tables; MUSER_CONSTANT from the prelude), its
// levels small integers made four to a word (format_iq_signs.h: IQ2, IQ3; format_iq1_grid.h: IQ1).
// level_bytes<N> at value j (j % N == 0) of a block: output word c holds values j + 4c .. + 3
// (for N < 4, only the N from j). They lie in group group_of<N>(j, c) of 8 values (a sign byte;
// an IQ2 or IQ1 grid point), from value in_group<N>(j, c) of it.
#pragma once
#include "formats.h"

namespace muser {

template <int N>
MUSER_FN uint32_t group_of(uint32_t j, int c) {
  return j / 8 + (N >= 8 ? c / 2 : 0);
}

template <int N>
MUSER_FN uint32_t in_group(uint32_t j, int c) {
  return N >= 8 ? 4 * (c % 2) : j % 8;
}

}  // namespace muser
