"""How a kernel's header is assembled from kernels/: includes inlined once, only the table's block
decoder in it; on CUDA, #include lines naming the files (MLX's CUDA backend spends time on every
evaluation per byte of source); kernels named by the text they compile."""

import re
import shutil

import mlx.core as mx
import pytest

from muser_mlx import FORMATS
from muser_mlx.backends import tuning
from muser_mlx.backends.device import CUDA, METAL
from muser_mlx.backends.source import DeviceKernel, Launch, kernel_header
from muser_mlx.formats.grids import arrays_of

KERNELS = tuning.KERNEL_SOURCES
Q4_K = FORMATS["Q4_K"]


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
    fmt = FORMATS[qtype]
    gather, matvec = dialect.gather_kernel.header(fmt), dialect.matvec_kernel.header(fmt)
    for header in (gather, matvec):
        assert re.findall(r"struct Format<ggml::(\w+)>", header) == [qtype]
        assert '#include "' not in header and "#pragma once" not in header and "//" not in header
    assert "muser_sum" not in gather and "muser_sum" in matvec  # the LM heads' lane operations
    # a codebook's words come on top (kernels/iq*_grid.h, ksigns_selectors.h)
    words = sum(len(kernel_header([f"{name}.h"])) for name in arrays_of(qtype))
    # bytes (IQ4_XS on CUDA: 13.8 KB, its value table, the prelude's two lookups of it and its
    # row type in it); 40.1 KB with every decoder in it, none of the grids
    assert len(gather) - words < 14_500


def test_cuda_includes_the_files_metal_gets_their_text():
    """NVRTC opens ``#include "/absolute/path"``; Metal's runtime compiler gets the text."""
    cuda = CUDA.gather_kernel.registered_header(Q4_K).splitlines()
    assert cuda == [f'#include "{KERNELS / name}"' for name in CUDA.gather_kernel.files(Q4_K)]
    assert all((KERNELS / name).is_file() and KERNELS.is_absolute() for name in CUDA.gather_kernel.files(Q4_K))
    assert kernel_header(CUDA.gather_kernel.files(Q4_K)) == CUDA.gather_kernel.header(Q4_K)
    assert METAL.gather_kernel.registered_header(Q4_K) == METAL.gather_kernel.header(Q4_K)


def test_a_folder_no_include_line_can_name_gets_the_text(tmp_path):
    """A kernels folder whose path holds a quote cannot be named in ``#include "..."``: CUDA gets
    the header's text then, as Metal does."""
    folder = tmp_path / 'say "kernels"'
    shutil.copytree(KERNELS, folder)
    kernel = DeviceKernel("cuda", "gather", ["table", "ids"], ["out"], None, lanes=False, includes=True)
    expected = CUDA.gather_kernel.header(Q4_K)
    with tuning.fixed(KERNEL_SOURCES=folder):
        assert kernel.registered_header(Q4_K) == kernel.header(Q4_K) == expected


def _recording_gather(builds):
    """A CUDA gather kernel whose registrations with MLX append their arguments to ``builds``."""

    def register():
        def build(**kw):
            builds.append(kw)
            return lambda **call: [None]

        return build

    return DeviceKernel("cuda", "gather", ["table", "ids"], ["out"], register, lanes=False, includes=True)


def _gather_q4k(kernel, threads=64, min_threadgroups=0):
    """Calls ``kernel`` on a Q4_K table of 10 rows of 512 values, threadgroups of ``threads``."""
    defines = (("DIMS", 512), ("VOCAB", 10), ("VALUES", 8))
    launch = Launch(Q4_K, defines, (64, 1, 1), (threads, 1, 1), (1, 512), mx.float32, min_threadgroups=min_threadgroups)
    kernel(launch, [mx.zeros((10, 36), mx.uint64), mx.zeros((1,), mx.int32)])


def _registered(directory, min_threadgroups=0):
    """What a CUDA gather kernel built from the kernel files in ``directory`` registers with MLX."""
    builds = []
    with tuning.fixed(KERNEL_SOURCES=directory):
        _gather_q4k(_recording_gather(builds), min_threadgroups=min_threadgroups)
    return builds[-1]


def test_a_kernel_is_named_by_the_text_it_compiles(tmp_path):
    """MLX keeps a compiled kernel under its name for the process: a changed decoder must be a
    new name, though the #include lines MLX sees stay the same; a changed comment is not."""
    shutil.copytree(KERNELS, tmp_path, dirs_exist_ok=True)
    decoder = tmp_path / "format_q4_k.h"
    base = _registered(tmp_path)
    assert base["name"].startswith("muser_gather_Q4_K_512_10_8_float32_uint64_int32_")
    assert base["name"] == _registered(KERNELS)["name"]
    assert base["header"].startswith(f'#include "{tmp_path / "prelude_cuda.h"}"\n')
    assert "\n#define FORMAT 12\n#define DIMS 512\n#define VOCAB 10\n#define VALUES 8\n" in base["header"]
    decoder.write_text(decoder.read_text() + "// a comment\n")
    assert _registered(tmp_path)["name"] == base["name"]
    decoder.write_text(decoder.read_text() + "static const int muser_unused = 0;\n")
    changed = _registered(tmp_path)
    assert changed["name"] != base["name"] and changed["header"] == base["header"]


@pytest.mark.skipif(shutil.which("cpp") is None, reason="no C preprocessor (cpp) on PATH")
def test_launch_bounds_go_before_the_name_mlx_writes(tmp_path):
    """MLX's CUDA backend writes `__global__ void custom_kernel_<name>(` after the header and takes
    no launch bounds: a launch's bounds are a macro of that name, which the C preprocessor expands
    to the bounds before the name, once (a macro is not expanded inside itself), and which the
    body's last line removes; the bounds name a kernel of their own."""
    import subprocess

    plain, bounded = _registered(KERNELS), _registered(KERNELS, min_threadgroups=4)
    assert bounded["name"] != plain["name"]
    function = "custom_kernel_" + bounded["name"]
    assert bounded["header"].endswith(f"#define {function} __launch_bounds__(64, 4) {function}\n")
    assert bounded["source"].endswith(f"\n#undef {function}\n") and function not in plain["header"] + plain["source"]
    # the macro and the body around the signature MLX writes, as NVRTC's preprocessor sees them
    macro = bounded["header"].splitlines()[-1]
    written = f"{macro}\n__global__ void {function}(float* out) {{\n#undef {function}\n}}\nvoid* p = &{function};\n"
    (tmp_path / "k.cu").write_text(written)
    done = subprocess.run(["cpp", "-P", str(tmp_path / "k.cu")], capture_output=True, text=True, check=True)
    assert f"__global__ void __launch_bounds__(64, 4) {function}(float* out)" in done.stdout
    assert f"p = &{function};" in done.stdout


def test_a_bounded_kernel_is_kept_by_its_threads():
    """A launch's bounds hold its threadgroup's threads: a launch of other threads and the same
    bound gets a kernel of its own, where the one kept would fail to launch on the GPU (CUDA's
    "invalid argument" for more threads than its bounds), and the same launch again the one kept."""
    builds = []
    kernel = _recording_gather(builds)
    for threads in (64, 128, 64):
        _gather_q4k(kernel, threads, min_threadgroups=4)
    names = [b["name"] for b in builds]
    assert len(names) == 2 and names[0] != names[1], names


def test_the_kernels_type_numbers_are_gguf_pys():
    """kernels/ggml_types.h names every type by gguf-py's number (the one source of them)."""
    import gguf

    enum = dict(re.findall(r"^  (\w+) = (\d+),$", (KERNELS / "ggml_types.h").read_text(), re.M))
    assert enum and {name: int(n) for name, n in enum.items()} == {
        name: gguf.GGMLQuantizationType[name].value for name in enum
    }
    assert set(FORMATS) <= set(enum)
