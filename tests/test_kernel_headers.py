"""How a kernel's header is assembled from kernels/: includes inlined once, only the table's block
decoder in it; on CUDA, #include lines naming the files (MLX's CUDA backend spends time on every
evaluation per byte of source); kernels named by the text they compile."""

import re
import shutil

import mlx.core as mx
import pytest

from muser_mlx import FORMATS
from muser_mlx.backends.kernel import CUDA, KERNELS, METAL, DeviceKernel, kernel_header


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
        assert re.findall(r"struct Format<ggml::(\w+)>", header) == [qtype]
        assert '#include "' not in header and "#pragma once" not in header and "//" not in header
    assert "muser_sum" not in gather and "muser_sum" in matvec  # the LM heads' lane operations
    assert len(gather) < 9000  # bytes (8.5 KB for Q5_K); 13.3 KB when every decoder was in it


def test_cuda_includes_the_files_metal_gets_their_text():
    """NVRTC opens ``#include "/absolute/path"``; Metal's runtime compiler gets the text."""
    cuda = CUDA.gather_kernel.registered_header(12).splitlines()
    assert cuda == [f'#include "{KERNELS / name}"' for name in CUDA.gather_kernel.files(12)]
    assert all((KERNELS / name).is_file() and KERNELS.is_absolute() for name in CUDA.gather_kernel.files(12))
    assert kernel_header(CUDA.gather_kernel.files(12)) == CUDA.gather_kernel.header(12)
    assert METAL.gather_kernel.registered_header(12) == METAL.gather_kernel.header(12)


def test_a_folder_no_include_line_can_name_gets_the_text(tmp_path):
    """A kernels folder whose path holds a quote cannot be named in ``#include "..."``: CUDA gets
    the header's text then, as Metal does."""
    folder = tmp_path / 'say "kernels"'
    shutil.copytree(KERNELS, folder)
    kernel = DeviceKernel("cuda", "gather", ["table", "ids"], ["out"], None, lanes=False, includes=True)
    kernel.directory = folder
    assert kernel.registered_header(12) == kernel.header(12) == CUDA.gather_kernel.header(12)


def _registered(directory):
    """What a CUDA gather kernel built from the kernel files in ``directory`` registers with MLX."""
    seen = {}

    def register():
        return lambda **kw: seen.update(kw)

    kernel = DeviceKernel("cuda", "gather", ["table", "ids"], ["out"], register, lanes=False, includes=True)
    kernel.directory = directory
    kernel.for_constants((("FORMAT", 12), ("DIMS", 512), ("VOCAB", 10), ("VALUES", 8), ("T", mx.float32)))
    return seen


def test_a_kernel_is_named_by_the_text_it_compiles(tmp_path):
    """MLX keeps a compiled kernel under its name for the process: a changed decoder must be a
    new name, though the #include lines MLX sees stay the same; a changed comment is not."""
    shutil.copytree(KERNELS, tmp_path, dirs_exist_ok=True)
    decoder = tmp_path / "format_q4_k.h"
    base = _registered(tmp_path)
    assert base["name"].startswith("muser_gather_12_512_10_8_float32_") and base["name"] == _registered(KERNELS)["name"]
    assert base["header"].startswith(f'#include "{tmp_path / "prelude_cuda.h"}"\n')
    assert "\n#define FORMAT 12\n#define DIMS 512\n#define VOCAB 10\n#define VALUES 8\n" in base["header"]
    decoder.write_text(decoder.read_text() + "// a comment\n")
    assert _registered(tmp_path)["name"] == base["name"]
    decoder.write_text(decoder.read_text() + "static const int muser_unused = 0;\n")
    changed = _registered(tmp_path)
    assert changed["name"] != base["name"] and changed["header"] == base["header"]


def test_the_kernels_type_numbers_are_gguf_pys():
    """kernels/ggml_types.h names every type by gguf-py's number (the one source of them)."""
    import gguf

    enum = dict(re.findall(r"^  (\w+) = (\d+),$", (KERNELS / "ggml_types.h").read_text(), re.M))
    assert enum and {name: int(n) for name, n in enum.items()} == {
        name: gguf.GGMLQuantizationType[name].value for name in enum
    }
    assert set(FORMATS) <= set(enum)
