// bfloat16 storage for host C++ (the CPU dialect and the Metal-on-CPU test shim).
#pragma once
#include <cstdint>
#include <cstring>

// bfloat16 output, rounded to nearest even like MLX's float -> bfloat16 conversion.
struct muser_bfloat16 {
  uint16_t bits;
  explicit muser_bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t(0x7fc0u | (u >> 16 & 0x8000u))
                                          : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
};
