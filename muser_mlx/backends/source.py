"""A kernel's source as MLX gets it, and a launch of it.

A kernel's header is the dialect's prelude, for an LM head the dialect's lane operations
(``lanes_<dialect>.h``), the table's block decoder (``format_<name>.h``) and the kernel's template
(``<name>.h``), with what they include; its body is the dialect's few lines (``<name>.metal`` /
``<name>.cu``) that call the template with the thread's index. A :class:`Launch` says which
table format and constants it is compiled for and how it runs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx

from ..formats import Format
from . import tuning

_INCLUDE = re.compile(r'#include "(\w+\.h)"')
_DEFINE = re.compile(r"[A-Z][A-Z0-9_]*")


def kernel_header(names: Sequence[str], read: Callable[[str], str] | None = None) -> str:
    """The kernel source files ``names`` as one header, in order, each ``#include "x.h"`` replaced
    by x.h's text where it first appears (once, as ``#pragma once`` has it), minus ``//``
    comments, blank lines and ``#pragma once``: what a kernel compiles, so it is what names it,
    and Metal's header (its runtime compiler reads no files). ``read(name)`` gives a file's text
    (default: the file in ``tuning.KERNEL_SOURCES``)."""
    if read is None:
        folder = tuning.KERNEL_SOURCES
        read = lambda name: (folder / name).read_text()  # noqa: E731
    done, lines = set(), []

    def add(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for line in read(name).splitlines():
            line = re.sub(r"\s*//.*", "", line)
            if include := _INCLUDE.fullmatch(line.strip()):
                add(include.group(1))
            elif line.strip() and line.strip() != "#pragma once":
                lines.append(line)

    for name in names:
        add(name)
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Launch:
    """One call of a kernel: compiled for ``format`` (its block decoder in the header, its ggml
    type ``#define``d as FORMAT; None for a kernel that reads no table) and the integer
    ``defines`` (``#define``d in order after the header), run on ``grid`` threads in threadgroups
    of ``threadgroup``, writing one output of ``output_shape`` and ``output_dtype``;
    ``shared_bytes``: the dynamic shared memory each threadgroup takes (CUDA; 0: none);
    ``min_threadgroups``: the threadgroups an SM is to hold at once (CUDA: ``__launch_bounds__``,
    which caps a thread's registers at what lets them in; 0: the compiler's choice)."""

    format: Format | None
    defines: tuple[tuple[str, int], ...]
    grid: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    output_shape: tuple[int, ...]
    output_dtype: mx.Dtype
    shared_bytes: int = 0
    min_threadgroups: int = 0

    def __post_init__(self):  # per call: kept to what a launch can get wrong at run time
        if len(self.grid) != 3 or min(self.grid) < 1 or len(self.threadgroup) != 3 or min(self.threadgroup) < 1:
            raise ValueError(
                f"a launch's grid and threadgroup are 3 positive sizes, got {self.grid}, {self.threadgroup}"
            )

    def define(self, name: str) -> int:
        """The value of constant ``name``; ``KeyError`` names the constants there are."""
        for key, value in self.defines:
            if key == name:
                return value
        raise KeyError(f"no constant {name!r} in this launch; it has {', '.join(k for k, _ in self.defines)}")

    def define_lines(self) -> str:
        """The constants as they follow the kernel's header: a ``#define`` line each, FORMAT (the
        format's ggml type) first, then ``defines`` in order."""
        defines = (() if self.format is None else (("FORMAT", self.format.ggml_type),)) + self.defines
        return "".join(f"\n#define {k} {v}" for k, v in defines) + "\n"

    def bounds(self) -> str:
        """CUDA's ``__launch_bounds__`` for :attr:`min_threadgroups` ("" for none)."""
        threads = self.threadgroup[0] * self.threadgroup[1] * self.threadgroup[2]
        return f"__launch_bounds__({threads}, {self.min_threadgroups})" if self.min_threadgroups else ""


class DeviceKernel:
    """One kernel of one dialect: ``name`` (``kernels/<name>.h``), its ``inputs`` and ``outputs``
    (MLX's names for the body), ``register`` (returns MLX's ``metal_kernel`` / ``cuda_kernel``),
    ``lanes`` (an LM head: it takes the dialect's lane operations).

    The header MLX gets is the files' text (:func:`kernel_header`), or, where the dialect's
    compiler reads files (``includes``: NVRTC), ``#include`` lines naming them: MLX's CUDA backend
    spends host time on every evaluation of a kernel in proportion to its source's length
    (docs/performance.md, "Kernel source by #include").

    Calling it with a :class:`Launch` and the inputs builds the MLX kernel on first use and keeps
    it: the constants are ``#define``d after the header, so a call passes no template arguments
    (MLX spends host time on each, every call); the inputs' dtypes only name the kernel (they are
    in its generated signature). The name ends in a digest of the text compiled: MLX keeps a
    compiled kernel under its name for the life of the process, and the #include lines it sees
    stay the same when the files change, so changed source must be a new name. The files are
    read from ``tuning.KERNEL_SOURCES``."""

    def __init__(
        self,
        dialect: str,
        name: str,
        inputs: list[str],
        outputs: list[str],
        register,
        lanes: bool = True,
        includes: bool = False,
    ):
        self.dialect, self.name, self.inputs, self.outputs = dialect, name, inputs, outputs
        self.lanes, self.includes = lanes, includes
        self._register = register
        self._kernels: dict[tuple, object] = {}

    def files(self, fmt: Format | None = None) -> tuple[str, ...]:
        """The header's files before their includes: prelude, lane operations, the decoder of
        ``fmt`` (none for a kernel without a table), template."""
        lanes = (f"lanes_{self.dialect}.h",) if self.lanes else ()
        decoder = () if fmt is None else (fmt.kernel_file,)
        return (f"prelude_{self.dialect}.h", *lanes, *decoder, f"{self.name}.h")

    def body(self) -> str:
        return (tuning.KERNEL_SOURCES / f"{self.name}.{'metal' if self.dialect == 'metal' else 'cu'}").read_text()

    def header(self, fmt: Format | None = None) -> str:
        return kernel_header(self.files(fmt))

    def registered_header(self, fmt: Format | None = None, text: str | None = None) -> str:
        """The header MLX gets: :meth:`header` (``text``, where the caller has read it), or with
        ``includes`` an ``#include`` by absolute path of each of :meth:`files` (the text again
        where the folder's path cannot be spelled inside ``#include "..."``: it holds a quote or
        a line break)."""
        folder: Path = tuning.KERNEL_SOURCES
        if not self.includes or any(c in str(folder) for c in '"\n'):
            return self.header(fmt) if text is None else text
        return "\n".join(f'#include "{folder / name}"' for name in self.files(fmt))

    def __call__(self, launch: Launch, inputs: list[mx.array], **options) -> mx.array:
        """The launch's output (``options``: more of MLX's kernel call arguments, e.g. ``verbose``)."""
        return self._kernel(launch, tuple(a.dtype for a in inputs))(
            inputs=inputs,
            grid=launch.grid,
            threadgroup=launch.threadgroup,
            output_shapes=[launch.output_shape],
            output_dtypes=[launch.output_dtype],
            **options,
        )[0]

    def runner(self, launch: Launch, dtypes: tuple[mx.Dtype, ...]) -> Callable[[list[mx.array]], mx.array]:
        """``inputs -> output``: the launch for inputs of ``dtypes``, its kernel found and its
        arguments made once, for a caller that repeats it (the gather keeps one per ids shape):
        finding the kernel is about 1.5 us of host time per call (docs/performance.md, "Compiled
        small batches")."""
        kernel, grid, threadgroup = self._kernel(launch, dtypes), launch.grid, launch.threadgroup
        shapes, out_dtypes = [launch.output_shape], [launch.output_dtype]

        def run(inputs: list[mx.array]) -> mx.array:
            return kernel(
                inputs=inputs, grid=grid, threadgroup=threadgroup, output_shapes=shapes, output_dtypes=out_dtypes
            )[0]

        return run

    def _kernel(self, launch: Launch, dtypes: tuple[mx.Dtype, ...]):
        """The MLX kernel for ``launch`` and inputs of ``dtypes``, built on first use."""
        if len(dtypes) != len(self.inputs):
            raise ValueError(
                f"kernel {self.name} takes {len(self.inputs)} inputs ({', '.join(self.inputs)}), got {len(dtypes)}"
            )
        fmt = launch.format
        key = (
            tuning.KERNEL_SOURCES,
            fmt and fmt.name,
            launch.defines,
            launch.shared_bytes,
            launch.bounds(),  # the threads too: a kernel bounded at 64 fails to launch at 128
            launch.output_dtype,
            *dtypes,
        )
        kernel = self._kernels.get(key)
        if kernel is None:
            kernel = self._kernels[key] = self._build(launch, list(dtypes))
        return kernel

    def translation_unit(self, launch: Launch, c_types: dict[str, str]) -> str:
        """The CUDA kernel as a file nvcc compiles without MLX (for ptxas's reports and the machine
        code: tests/test_cuda_compile.py, benchmarks/sass_counts.py): the standard headers, the
        header MLX gets as text, the launch's constants, and the body in a signature as MLX's
        CUDA backend generates it, an input's ``_shape`` and ``_ndim`` where the body reads them
        (as ``int32_t*`` and ``int``); ``c_types``: each input's and output's C type by name."""
        body, params = self.body(), []
        for name in self.inputs:
            params.append(f"const {c_types[name]}* {name}")
            params += [f"const int32_t* {name}_shape"] if f"{name}_shape" in body else []
            params += [f"int {name}_ndim"] if f"{name}_ndim" in body else []
        params += [f"{c_types[name]}* {name}" for name in self.outputs]
        return "\n".join(
            ["#include <cstdint>", "#include <cuda_fp16.h>", "#include <cuda_bf16.h>", self.header(launch.format)]
            + [
                launch.define_lines(),
                f'extern "C" __global__ void {launch.bounds()} k({", ".join(params)}) {{',
                body,
                "}",
            ]
        )

    def _build(self, launch: Launch, dtypes: list[mx.Dtype]):
        for name, value in launch.defines:
            if not _DEFINE.fullmatch(name) or type(value) is not int:
                raise ValueError(f"a kernel constant is an upper-case name and an int, got {name!r} = {value!r}")
        fmt, body = launch.format, self.body()
        text = self.header(fmt)
        define_lines = launch.define_lines()
        bounds = launch.bounds() if self.dialect == "cuda" else ""
        digest = hashlib.sha256((text + define_lines + body + bounds).encode()).hexdigest()[:12]
        spelled = [str(v) for _, v in launch.defines] + [
            str(d).rsplit(".", 1)[-1] for d in (launch.output_dtype, *dtypes)
        ]
        name = "_".join(["muser", self.name, *(() if fmt is None else (fmt.name,)), *spelled, digest])
        header = self.registered_header(fmt, text) + define_lines
        if bounds:
            # MLX's CUDA backend writes `__global__ void custom_kernel_<name>(` after the header
            # and takes no launch bounds: this macro puts them before the name (their place in
            # CUDA's syntax), and the body's last line removes it before NVRTC looks the name up.
            function = f"custom_kernel_{name}"
            header += f"#define {function} {bounds} {function}\n"
            body += f"\n#undef {function}\n"
        shared = {"shared_memory": launch.shared_bytes} if launch.shared_bytes else {}
        return self._register()(
            name=name,
            input_names=self.inputs,
            output_names=self.outputs,
            source=body,
            header=header,
            **shared,
        )
