"""The gather kernel on MLX's GPU backends, built from the shared source in ``kernels/``.

One kernel object per dialect serves every format, width, vocabulary, output dtype and batch
width: per-table constants are template arguments, the number of ids is read from the ids
array at run time.
"""

from __future__ import annotations

from importlib.resources import files

import mlx.core as mx

THREADGROUP = 256
MAX_THREADS = 1 << 30  # grid-stride beyond this: MLX's grid is a 32-bit int


def kernel_source(name: str) -> str:
    return (files("muser_mlx.kernels") / name).read_text()


def values_per_thread(dims: int) -> int:
    """Outputs per thread: 4 (one 16-byte float32 store; measured faster than 8 on an H100),
    else the largest of 2, 1 that divides ``dims``."""
    return next(v for v in (4, 2, 1) if dims % v == 0)


class DeviceGather:
    """The gather for one dialect: ``header`` = prelude + block decoders + gather template,
    ``source`` = the dialect's few-line body that calls the template with its thread index."""

    def __init__(self, dialect: str, body: str, register):
        self.dialect = dialect
        self.header = "\n".join(kernel_source(f) for f in (f"prelude_{dialect}.h", "formats.h", "gather.h"))
        self.source = kernel_source(body)
        self._register = register
        self._kernel = None

    @property
    def kernel(self):
        if self._kernel is None:
            self._kernel = self._register()(
                name="muser_gather",
                input_names=["table", "ids"],
                output_names=["out"],
                source=self.source,
                header=self.header,
            )
        return self._kernel

    def template(self, table, dtype: mx.Dtype, id_dtype: mx.Dtype) -> list[tuple]:
        """Per-table constants. out's and ids' dtypes are in the generated signature; naming them
        here keeps each signature's compiled kernel apart (CUDA names kernels by template)."""
        return [
            ("FORMAT", table.format.ggml_type),
            ("DIMS", table.dims),
            ("VOCAB", table.vocab),
            ("VALUES", values_per_thread(table.dims)),
            ("T", dtype),
            ("I", id_dtype),
        ]

    def bind(self, table, dtype: mx.Dtype):
        """``ids [n] -> [n, dims]`` for this table and output dtype, templates built once."""
        kernel, dims, data = self.kernel, table.dims, table.data
        groups = dims // values_per_thread(dims)
        templates = {}

        def gather(ids: mx.array) -> mx.array:
            n = ids.shape[0]
            if n == 0:
                return mx.zeros((0, dims), dtype)
            template = templates.get(ids.dtype)
            if template is None:
                template = templates[ids.dtype] = self.template(table, dtype, ids.dtype)
            return kernel(
                inputs=[data, ids],
                template=template,
                grid=(min(n * groups, MAX_THREADS), 1, 1),
                threadgroup=(THREADGROUP, 1, 1),
                output_shapes=[(n, dims)],
                output_dtypes=[dtype],
            )[0]

        return gather

METAL = DeviceGather("metal", "gather.metal", lambda: mx.fast.metal_kernel)
CUDA = DeviceGather("cuda", "gather.cu", lambda: mx.fast.cuda_kernel)
