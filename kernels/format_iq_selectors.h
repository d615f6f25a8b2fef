// The IQ2 grids of byte selectors (IQ2_XXS, IQ2_XS): a group's signed level bytes by byte selects.
#pragma once
#include "format_iq_signs.h"
#include "ksigns_selectors.h"

namespace muser {

// The selector grids (IQ2_XXS, IQ2_XS: muser_mlx/formats/grids.py): a point's word holds value v's
// index among the grid's levels in nibble v. Bit 2 of nibble v set where value v is minus makes
// it a byte selector of the 8 level bytes zero + level (bytes 0-2) and zero - level (bytes 4-6),
// so one byte select (the prelude's muser_select_bytes: CUDA's prmt) gives four signed level
// bytes, and the sign mask, its shifts and the subtraction of signed_word are gone.
// SignSelectors::select(index): the bits 2 of a group's ksigns index, from ksigns_selectors.h (all
// 128, generated from gguf-py's ksigns), read as the grid is (MUSER_GRID: in a dialect's head
// kernels that keep grids in shared memory, the copy the threadgroup makes with its grid, share).
struct SignSelectors {
  static MUSER_FN void share() { MUSER_SHARE_GRID(ksigns_selectors); }
  static MUSER_FN uint32_t select(uint32_t index) { return MUSER_GRID(ksigns_selectors)[index]; }
};

// The level bytes of values k .. k + 3 of a group (value k in byte 0) from its selector, grid word
// | SignSelectors::select, of a grid of LEVELS (bytes, *_levels) below ZERO + 1.
template <int ZERO, uint32_t LEVELS>
MUSER_FN uint32_t selected_word(uint32_t selector, uint32_t k) {
  enum : uint32_t { PLUS = 0x01010101u * ZERO + LEVELS, MINUS = 0x01010101u * ZERO - LEVELS };
  return muser_select_bytes(PLUS, MINUS, selector >> (4 * k));
}

}  // namespace muser
