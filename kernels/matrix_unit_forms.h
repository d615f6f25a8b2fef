// The decoders' forms the matrix units' heads (mma.h, tile_mma.h) take (formats.h: HeadForms):
// IQ3_XXS's signed points (docs/performance.md, "Signed points": 1.31x faster at 16 rows; the
// one-row head, bytedot.h, level with them where a threadgroup streams more rows and slower
// where it fills them for 32, "Threadgroups of more rows"). muser_mlx/formats/grids.py's
// SIGNED_POINTS counts their shared memory.
#pragma once
#include "formats.h"

namespace muser {

template <>
struct HeadForms<0> {
  enum { signed_points = 1 };
};

}  // namespace muser
