// F16: one little-endian float16 per value (formats.h: HalfLevels).
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::F16> : HalfLevels<Format<ggml::F16>> {
  static MUSER_FN float to_float(uint32_t bits) { return muser_f16_bits_to_float(uint16_t(bits)); }
#ifdef MUSER_F16_FLOATS
  // The dialect's vector conversion of whole vectors of 8, the same values (prelude_cpu.h: F16C or
  // NEON, where GCC converted one value at a time).
  template <int N>
  static MUSER_FN void to_floats(MUSER_LOCAL const uint32_t* w, MUSER_LOCAL float* lv) {
    if constexpr (N % 8 == 0) {
      muser_f16_floats<N>(w, lv);
    } else {
      HalfLevels<Format>::template to_floats<N>(w, lv);
    }
  }
#endif
};

}  // namespace muser
