"""The gather and matvec kernels on MLX's GPU backends, built from the shared source in ``kernels/``.

One kernel object per (dialect, kernel) serves every format, width, vocabulary, dtype and batch
width: per-table constants are template arguments, the number of ids (or rows of x) is read from
the input's shape at run time.
"""

from __future__ import annotations

from importlib.resources import files

import mlx.core as mx

THREADGROUP = 256  # threads along a row; a threadgroup is one row high
MAX_ROWS_IN_FLIGHT = 65535  # the gather grid's height (CUDA's limit); more ids loop over rows
MAX_THREADS = 1 << 30  # matvec's 1-D grid: grid-stride beyond this (MLX's grid is a 32-bit int)
WARP = 32  # lanes of a Metal simdgroup / CUDA warp (kernels/matvec.h: warp_lanes)
# Table rows per matvec warp by ROWS: the fastest in benchmarks/results/matvec_tuning_gpu.md (H200).
VOCAB_ROWS_PER_WARP = {1: 4, 2: 8, 4: 4, 8: 4}


def kernel_source(name: str) -> str:
    return (files("muser_mlx.kernels") / name).read_text()


def values_per_thread(dims: int) -> int:
    """Values per decode call (the gather's outputs per thread, the matvec's per lane and step):
    8 (two 16-byte float32 stores), or the largest of 4, 2, 1 that divides ``dims``. On an H100
    the gather's 2-D grid with 8 values and 256-thread rows measured best among 4/8 values,
    128/256 threads and row-per-threadgroup variants."""
    return next(v for v in (8, 4, 2, 1) if dims % v == 0)


def matvec_values(dims: int) -> int:
    """Values per lane and step of the matvec (VALUES): a whole run of 16 (kernels/formats.h:
    one scale and offset per step; measured faster than 8 at every ROWS but 16), else
    values_per_thread."""
    return 16 if dims % 16 == 0 else values_per_thread(dims)


def rows_per_pass(n: int) -> int:
    """Rows of x per streaming pass over the table (matvec's ROWS): 1, 2, 4 or 8."""
    return next(r for r in (1, 2, 4, 8) if n <= r or r == 8)


def vocab_rows_per_warp(rows: int) -> int:
    """Table rows a matvec warp decodes per step (VROWS), each reusing the step's x values."""
    return VOCAB_ROWS_PER_WARP[rows]


class DeviceKernel:
    """One kernel of one dialect: ``header`` = prelude + block decoders + the kernel's template
    (``<name>.h``), ``source`` = the dialect's few-line body (``<name>.metal`` / ``<name>.cu``)
    that calls the template with its thread index. Built on first use, then cached."""

    def __init__(self, dialect: str, name: str, inputs: list[str], outputs: list[str], register):
        self.dialect, self.name = dialect, name
        self.header = "\n".join(kernel_source(f) for f in (f"prelude_{dialect}.h", "formats.h", f"{name}.h"))
        self.source = kernel_source(f"{name}.{'metal' if dialect == 'metal' else 'cu'}")
        self.inputs, self.outputs = inputs, outputs
        self._register = register
        self._kernel = None

    @property
    def kernel(self):
        if self._kernel is None:
            self._kernel = self._register()(
                name=f"muser_{self.name}",
                input_names=self.inputs,
                output_names=self.outputs,
                source=self.source,
                header=self.header,
            )
        return self._kernel


def table_constants(table) -> list[tuple]:
    """The template arguments every kernel takes from the table."""
    return [("FORMAT", table.format.ggml_type), ("DIMS", table.dims), ("VOCAB", table.vocab)]


def gather_template(table, dtype: mx.Dtype, id_dtype: mx.Dtype) -> list[tuple]:
    """The gather's per-table constants. out's and ids' dtypes are in the generated signature;
    naming them here keeps each signature's compiled kernel apart (CUDA names kernels by template)."""
    return [*table_constants(table), ("VALUES", values_per_thread(table.dims)), ("T", dtype), ("I", id_dtype)]


def matvec_template(table, x: mx.array, rows: int | None = None, vrows: int | None = None,
                    values: int | None = None) -> list[tuple]:
    """The matvec's per-table constants and its layout: ``rows`` (ROWS, default
    ``rows_per_pass(n)``), ``vrows`` (VROWS, default ``vocab_rows_per_warp(rows)``) and
    ``values`` (VALUES, default ``matvec_values(dims)``); benchmarks/matvec_tuning.py sets them.
    x's dtype (also out's) is in the generated signature, named here for the same reason as the
    gather's."""
    rows = rows or rows_per_pass(x.shape[0])
    return [
        *table_constants(table),
        ("VALUES", values or matvec_values(table.dims)),
        ("ROWS", rows),
        ("VROWS", vrows or vocab_rows_per_warp(rows)),
        ("X", x.dtype),
    ]


def matvec_threads(vocab: int, vrows: int) -> int:
    """One warp per ``vrows`` vocab rows, grid-striding beyond MAX_THREADS."""
    return min(-(-vocab // vrows), MAX_THREADS // WARP) * WARP


class DeviceBackend:
    """A GPU dialect's kernels: the gather (rows of the table, ``bind``) and the matvec (logits)."""

    def __init__(self, dialect: str, register):
        self.gather_kernel = DeviceKernel(dialect, "gather", ["table", "ids"], ["out"], register)
        self.matvec_kernel = DeviceKernel(dialect, "matvec", ["table", "x"], ["out"], register)

    def bind(self, table, dtype: mx.Dtype):
        """``ids [n] -> [n, dims]`` for this table and output dtype, templates built once.
        Grid: x = the DIMS / VALUES groups of a row, y = rows in flight (kernels/gather.h)."""
        kernel, dims, data = self.gather_kernel.kernel, table.dims, table.data
        groups = dims // values_per_thread(dims)
        templates = {}

        def gather(ids: mx.array) -> mx.array:
            n = ids.shape[0]
            if n == 0:
                return mx.zeros((0, dims), dtype)
            template = templates.get(ids.dtype)
            if template is None:
                template = templates[ids.dtype] = gather_template(table, dtype, ids.dtype)
            return kernel(
                inputs=[data, ids],
                template=template,
                grid=(groups, min(n, MAX_ROWS_IN_FLIGHT), 1),
                threadgroup=(THREADGROUP, 1, 1),
                output_shapes=[(n, dims)],
                output_dtypes=[dtype],
            )[0]

        return gather

    def matvec(self, table, x: mx.array, rows: int | None = None, vrows: int | None = None,
               values: int | None = None) -> mx.array:
        """``x [n, dims]`` (n >= 1, floating) -> logits ``[n, vocab]`` in x's dtype, streaming
        the table once per ``rows`` rows of x; the layout as in :func:`matvec_template`."""
        assert x.ndim == 2 and x.shape[0] >= 1 and x.shape[1] == table.dims, (x.shape, table.dims)
        template = matvec_template(table, x, rows, vrows, values)
        return self.matvec_kernel.kernel(
            inputs=[table.data, x],
            template=template,
            grid=(matvec_threads(table.vocab, dict(template)["VROWS"]), 1, 1),
            threadgroup=(THREADGROUP, 1, 1),
            output_shapes=[(x.shape[0], table.vocab)],
            output_dtypes=[x.dtype],
        )[0]


METAL = DeviceBackend("metal", lambda: mx.fast.metal_kernel)
CUDA = DeviceBackend("cuda", lambda: mx.fast.cuda_kernel)
