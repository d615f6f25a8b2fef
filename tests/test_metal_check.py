"""The Metal source MLX generates for every kernel the package registers, checked as Metal's
compiler would check it (tests/metal_check.py): address spaces, no C++ standard library, no
exceptions, no function pointers, no recursion. Each check is shown to fail on a source that
breaks its rule."""

import mlx.core as mx
import numpy as np
import pytest

from muser_mlx import FORMATS, Table

from conftest import random_table_bytes
from kernel_harness import gather_metal_source, matvec_metal_source
from metal_check import CLANG, NO_CLANG, MetalError, metal_check

pytestmark = pytest.mark.skipif(CLANG is None, reason=NO_CLANG)

DTYPES = [mx.float32, mx.float16, mx.bfloat16]


def _table(qtype: str) -> Table:
    dims = max(FORMATS[qtype].block_values, 32)
    return Table.from_bytes(random_table_bytes(np.random.default_rng(0), qtype, 3, dims), qtype, dims)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_every_generated_kernel_is_metal(capfd, qtype, dtype):
    """The gather (ids in device memory, and one id, which MLX passes in constant memory) and
    the matvec, for every format and dtype."""
    table = _table(qtype)
    for ids in (mx.array([0, 2], mx.int32), mx.array([1], mx.uint8)):
        metal_check(gather_metal_source(table, ids, dtype, capfd))
    metal_check(matvec_metal_source(table, mx.zeros((2, table.dims), dtype), capfd))


KERNEL = """#include "prelude_metal.h"
{before}
[[kernel]] void k(device float* out [[buffer(0)]], const constant uint64_t* words [[buffer(1)]]) {{
  thread float v[1] = {{1.0f}};
  {body}
}}
"""


def test_the_check_compiles_a_kernel_that_keeps_its_address_spaces():
    metal_check(KERNEL.format(before="", body="muser_store<1>(out, v);"))


@pytest.mark.parametrize(
    "before, body, message",
    [
        ("inline void set(thread float* p) { p[0] = 0.0f; }", "set(out);", "address space"),
        ("", "muser_store<1>(out, out);", "address space"),
        ("", "muser_store<1>(v, v);", "deduced type 'device float \\*' of 1st parameter does not match"),
        ("", "out[0] = float(muser_bytes(words)[0]);", "does not match adjusted type 'constant uint64_t const \\*'"),
        ("#include <cstring>", "", "cstring' file not found"),
        ("", "std::swap(v[0], v[0]);", "undeclared identifier 'std'"),
        ("", "memcpy(v, v, 4);", "undeclared identifier 'memcpy'"),
        ("", "if (v[0] > 2.0f) throw 1;", "exceptions disabled"),
    ],
    ids=[
        "device for thread",
        "device for thread in a template",
        "thread for device",
        "constant for device",
        "header",
        "std",
        "memcpy",
        "throw",
    ],
)
def test_what_metal_lacks_does_not_compile(before, body, message):
    with pytest.raises(MetalError, match=message):
        metal_check(KERNEL.format(before=before, body=body))


@pytest.mark.parametrize(
    "before, body, message",
    [
        (
            "inline float twice(float x) { return 2.0f * x; }",
            "float (*f)(float) = twice; out[0] = f(v[0]);",
            "function pointer",
        ),
        (
            "inline uint32_t down(uint32_t n) { return n ? down(n - 1) : 0; }",
            "out[0] = float(down(3));",
            r"recursion: \w*down\w* -> \w*down\w*",
        ),
        (
            "inline uint32_t odd(uint32_t n);\ninline uint32_t even(uint32_t n) { return n ? odd(n - 1) : 1; }\n"
            "inline uint32_t odd(uint32_t n) { return n ? even(n - 1) : 0; }",
            "out[0] = float(even(4));",
            "recursion: .*even.* -> .*odd.* -> .*even",
        ),
    ],
    ids=["function pointer", "recursion", "mutual recursion"],
)
def test_what_the_ir_shows_is_refused(before, body, message):
    with pytest.raises(MetalError, match=message):
        metal_check(KERNEL.format(before=before, body=body))
