"""How a kernel's header is assembled from kernels/: includes inlined once, and only the table's
block decoder in it (MLX's CUDA backend spends time on every evaluation per byte of source)."""

import re

import pytest

from muser_mlx import FORMATS
from muser_mlx.backends.kernel import CUDA, METAL, kernel_header


def test_each_include_is_inlined_once_where_it_first_appears():
    files = {
        "a.h": '#pragma once\n#include "b.h"\nint a;  // a comment\n\n#include "c.h"\n',
        "b.h": "#pragma once\nint b;\n",
        "c.h": '#include "b.h"\n#include <cstdint>\nint c;\n',
    }
    assert kernel_header(["a.h", "c.h"], files.__getitem__) == "int b;\nint a;\n#include <cstdint>\nint c;"


@pytest.mark.parametrize("dialect", [CUDA, METAL], ids=["cuda", "metal"])
@pytest.mark.parametrize("qtype", sorted(FORMATS))
def test_a_kernel_header_holds_its_tables_decoder_alone(dialect, qtype):
    ggml_type = FORMATS[qtype].ggml_type
    gather, matvec = dialect.gather_kernel.header(ggml_type), dialect.matvec_kernel.header(ggml_type)
    for header in (gather, matvec):
        assert re.findall(r"struct Format<(\d+)>", header) == [str(ggml_type)]
        assert '#include "' not in header and "#pragma once" not in header and "//" not in header
    assert "muser_sum" not in gather and "muser_sum" in matvec  # the LM heads' lane operations
    assert len(gather) < 8000  # bytes; 13.3 KB when every decoder was in it
