"""The CPU dialect's vector hooks (kernels/prelude_cpu.h) against the shared loops they replace, for
every run length N: the value tables' 16-byte shuffle (format_value_tables.h's table_lookup,
MUSER_TABLE_BYTES) and the float16 conversion (format_f16.h's to_floats, MUSER_F16_FLOATS), bit
for bit. The extension runs them at N = 16 only (tests/test_cpu_extension.py checks it against
gguf-py there); the kernel harness builds for the baseline ISA and takes the loops. This driver is
built for the host's vector extensions, as the extension's kernel units are.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest

from kernel_harness import CXX, KERNELS

DRIVER = r"""
#include "prelude_cpu.h"
#include "format_value_tables.h"
#include "format_f16.h"

// Words of nibble bytes through table_lookup<N>, against table_bytes word by word.
template <int N>
int table_mismatches(muser::ByteTable t, const uint32_t* words, int count) {
  enum { WORDS = (N + 3) / 4 };
  int bad = 0;
  for (int c = 0; c + WORDS <= count; c += WORDS) {
    uint32_t w[WORDS];
    for (int k = 0; k < WORDS; ++k) w[k] = words[c + k];
    muser::table_lookup<N>(t, w);
    for (int k = 0; k < WORDS; ++k) bad += w[k] != muser::table_bytes(t, words[c + k]);
  }
  return bad;
}

// Every float16 bit pattern through Format<F16>::to_floats<N>, against muser_f16_bits_to_float.
template <int N>
int f16_mismatches() {
  int bad = 0;
  for (uint32_t b = 0; b < 65536; b += N) {
    uint32_t w[(N + 1) / 2] = {};
    for (int k = 0; k < N; ++k) w[k / 2] |= (b + k) << (16 * (k % 2));
    float lv[N];
    muser::Format<muser::ggml::F16>::to_floats<N>(w, lv);
    for (int k = 0; k < N; ++k) {
      const float ref = muser_f16_bits_to_float(uint16_t(b + k));
      bad += std::memcmp(&ref, &lv[k], 4) != 0;
    }
  }
  return bad;
}

extern "C" int hooks() {
  int h = 0;
#ifdef MUSER_TABLE_BYTES
  h |= 1;
#endif
#ifdef MUSER_F16_FLOATS
  h |= 2;
#endif
  return h;
}

extern "C" int table_mismatches_all(const uint32_t* words, int count) {
  int bad = 0;
  const muser::ByteTable tables[2] = {muser::iq4nl_values(), muser::e2m1_values()};
  for (const muser::ByteTable t : tables) {
    bad += table_mismatches<1>(t, words, count) + table_mismatches<2>(t, words, count) +
           table_mismatches<4>(t, words, count) + table_mismatches<8>(t, words, count) +
           table_mismatches<16>(t, words, count);
  }
  return bad;
}

extern "C" int f16_mismatches_all() {
  return f16_mismatches<1>() + f16_mismatches<2>() + f16_mismatches<4>() + f16_mismatches<8>() + f16_mismatches<16>();
}
"""


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if CXX is None:
        pytest.skip("needs a C++ compiler (g++ or clang++)")
    d = tmp_path_factory.mktemp("vector_hooks")
    src, lib = d / "hooks.cpp", d / "hooks.so"
    src.write_text(DRIVER)
    flags = ["-std=c++17", "-O2", "-march=native", "-shared", "-fPIC"]
    subprocess.run([CXX, *flags, f"-I{KERNELS}", str(src), "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def needs_hook(driver, bit: int, name: str) -> None:
    if not driver.hooks() & bit:
        pytest.skip(f"this host's vector extensions do not define {name} (prelude_cpu.h)")


def test_table_shuffle_is_the_per_byte_lookup(driver):
    needs_hook(driver, 1, "MUSER_TABLE_BYTES")
    words = np.random.default_rng(0).integers(0, 2**32, 4096, dtype=np.uint32) & np.uint32(0x0F0F0F0F)
    words[:16] = np.arange(16, dtype=np.uint32) * np.uint32(0x01010101)  # every nibble in every byte
    count = len(words)
    assert driver.table_mismatches_all(words.ctypes.data_as(ctypes.c_void_p), count) == 0


def test_f16_vector_conversion_is_the_scalar_one_for_every_bit_pattern(driver):
    needs_hook(driver, 2, "MUSER_F16_FLOATS")
    assert driver.f16_mismatches_all() == 0
