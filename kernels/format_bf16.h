// BF16: one little-endian bfloat16 per value (formats.h: HalfLevels).
#pragma once
#include "formats.h"

namespace muser {

template <>
struct Format<ggml::BF16> : HalfLevels<Format<ggml::BF16>> {
  static MUSER_FN float to_float(uint32_t bits) { return bf16_bits_to_float(bits); }
};

}  // namespace muser
