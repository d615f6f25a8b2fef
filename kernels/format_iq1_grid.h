// The IQ1 levels: a value is scale * (grid value +- 1/8) = (scale / 8) * (8 * grid value +- 1),
// both factors exact, so their one product rounds as ggml's does; level + 9 = 8u + 1 +- 1 for
// u = grid value + 1, held in iq1s_grid's nibbles.
#pragma once
#include "format_iq_grid.h"
#include "iq1s_grid.h"

namespace muser {

// The bytes level + 9 of values k .. k + 3 of grid point `entry` (value b's u in nibble b / 4 of
// byte b % 4 of its word), its delta -1/8 where `minus`. The +1/8 bytes are masked in, not chosen:
// the sign is a coin toss per group (IQ1_M's groups of 8), and compilers made the choice a branch.
template <int N>
MUSER_FN uint32_t delta_word(uint32_t entry, uint32_t k, bool minus) {
  const uint32_t plus = 0x02020202u & (uint32_t(minus) - 1u);
  const uint32_t bytes = (((MUSER_GRID(iq1s_grid)[entry] >> (k / 4 * 4)) & 0x0F0F0F0Fu) << 3) | plus;
  return bytes >> (N >= 4 ? 0 : 8 * (k % 4));
}

}  // namespace muser
