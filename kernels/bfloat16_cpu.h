// bfloat16 storage for host C++ (the CPU dialect and the Metal-on-CPU test shim).
#pragma once
#include <cstdint>
#include <cstring>

// bfloat16: the top 16 bits of a float32. From float rounded to nearest even like MLX's
// float -> bfloat16 conversion; to float exact (matvec reads bfloat16 x).
struct muser_bfloat16 {
  uint16_t bits;
  explicit muser_bfloat16(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    bits = (u & 0x7fffffffu) > 0x7f800000u ? uint16_t(0x7fc0u | (u >> 16 & 0x8000u))
                                          : uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  explicit operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
