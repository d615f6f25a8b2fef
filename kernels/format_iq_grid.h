// What the grid (codebook) formats share: a group of values is a point of a grid
// (kernels/iq*_grid.h, generated from gguf-py's tables; MUSER_CONSTANT from the prelude), its
// levels small integers made four to a word (format_iq_signs.h: IQ2, IQ3; format_iq1_grid.h: IQ1).
// level_bytes<N> at value j (j % N == 0) of a block: output word c holds values j + 4c .. + 3
// (for N < 4, only the N from j). They lie in group group_of<N>(j, c) of 8 values (a sign byte;
// an IQ2 or IQ1 grid point), from value in_group<N>(j, c) of it.
#pragma once
#include "formats.h"

// A grid as a decoder reads it, MUSER_GRID(grid): the grid itself (MUSER_CONSTANT), or in a
// dialect's head kernels that keep grids in shared memory (MUSER_SHARED_GRIDS: lanes_cuda.h) the
// copy made by the format's share_grid (formats.h), MUSER_SHARE_GRID(grid), which every thread of
// the threadgroup calls before its first read; the copy's array is the grid's own by its
// generated tag (muser_mlx/formats/grids.py: shared_tag).
#ifdef MUSER_SHARED_GRIDS
#define MUSER_GRID(grid) muser_shared_words<sizeof(grid) / 4, grid##_tag>()
#define MUSER_SHARE_GRID(grid) muser_share_words(grid, MUSER_GRID(grid), sizeof(grid) / 4)
#else
#define MUSER_GRID(grid) grid
#define MUSER_SHARE_GRID(grid)
#endif

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
