// The IQ3_XXS grid's points under every sign pattern of a word, for the head kernels that take
// them (formats.h: HeadForms).
#pragma once
#include "format_iq_signs.h"

namespace muser {

// Word 16 e + s: point e's level bytes (F::grid_word, F::grid_points) under sign bits s (bit b:
// value b minus). In a dialect's head kernels that keep grids in shared memory, the threadgroup
// fills it (share) and a word's four signed level bytes are one read of it at the point and its
// 4 signs, no masks and no subtraction ("Signed points").
template <typename F>
struct SignedPoints {
  enum { words = 16 * F::grid_points };
  static MUSER_FN uint32_t word(uint32_t i) {
    return signed_word<4>(F::grid_word(i / 16), SignMasks<false>::mask(i % 16, 0), 0, F::zero);
  }
#ifdef MUSER_SHARED_GRIDS
  static MUSER_FN uint32_t* table() { return muser_shared_words<words, 0>(); }
  static MUSER_FN void share() { muser_fill_words<SignedPoints>(table(), words); }
  // The level bytes of values k .. k + 3 of point `entry` (value k in byte 0) under the group's
  // sign bits `signs`.
  template <int N>
  static MUSER_FN uint32_t level_word(uint32_t entry, uint32_t signs, uint32_t k) {
    return table()[16 * entry + ((signs >> (k / 4 * 4)) & 15u)] >> (N >= 4 ? 0 : 8 * (k % 4));
  }
#endif
};

}  // namespace muser
