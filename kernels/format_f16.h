// F16: one little-endian float16 per value (formats.h: HalfLevels).
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::F16> : HalfLevels<Format<ggml::F16>> {
  static MUSER_FN float to_float(uint32_t bits) { return muser_f16_bits_to_float(uint16_t(bits)); }
};

}  // namespace muser
