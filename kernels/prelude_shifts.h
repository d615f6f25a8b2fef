// The byte operations that prelude_cuda.h does by byte permutes (__byte_perm), by shifts and masks:
// the CPU and Metal dialects' (prelude_cpu.h, prelude_metal.h). Needs MUSER_FN and uint32_t.
#pragma once

MUSER_FN uint32_t muser_mantissa_byte(uint32_t w, int k) { return 0x4B000000u | ((w >> (8 * k)) & 255u); }
MUSER_FN uint32_t muser_odd_bytes(uint32_t w) { return (w >> 8) & 0x00FF00FFu; }
MUSER_FN uint32_t muser_lane_high_bytes(uint32_t even, uint32_t odd) {
  return ((even >> 8) & 0x00FF00FFu) | (odd & 0xFF00FF00u);
}
MUSER_FN uint32_t muser_sign_bytes(uint32_t w) { return ((w >> 7) & 0x01010101u) * 255u; }
MUSER_FN uint32_t muser_byte_pair(uint32_t lo, uint32_t hi, uint32_t k) {
  return ((lo >> (8 * k)) & 255u) | ((hi >> (8 * k)) & 255u) << 8;
}
