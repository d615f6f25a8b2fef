// How the head kernels (bytedot.h, mma.h) hand table rows to the block decoders (formats.h).
#pragma once
#include "formats.h"

namespace muser {

// The rows as a kernel's decoders take them: the table's byte pointers, or where the rows are whole
// words and the blocks are not (the 2- and 1-byte-aligned formats at most dims), the format takes
// word_rows and the kernel asks for them (ALLOW: kernels/mma.h's WORD_ROWS), the prelude's
// muser_row, where it has one (CUDA).
template <typename F, int DIMS, typename TableP, bool ALLOW = true,
          bool WORD_ROWS = ALLOW && F::word_rows && (DIMS / F::block_values * F::block_bytes) % 4 == 0 &&
                           F::block_bytes % 4 != 0>
struct row_type {
  typedef TableP type;
};
#ifdef MUSER_ROW
template <typename F, int DIMS, typename TableP, bool ALLOW>
struct row_type<F, DIMS, TableP, ALLOW, true> {
  typedef muser_row type;
};
#endif

}  // namespace muser
