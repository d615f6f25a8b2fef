"""Table: a quantized embedding table held as its raw bytes in MLX memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from .check import check_table
from .errors import GGUFError
from .formats import Format, get_format
from .gguf import GGUFFile, TensorInfo, opened, table_tensor
from .memory import check_fits


def _read_table(f: GGUFFile, t: TensorInfo) -> mx.array:
    """``uint8 [rows, row_bytes]``: ``t``'s bytes read from ``f`` into the memory of a new MLX
    array. The array is evaluated on the CPU stream first (a fresh, contiguous buffer that no
    other array shares) and nothing else sees it until it is filled; a short read raises
    ``GGUFError`` and drops it. Reading into a NumPy array and copying that into MLX would hold
    the table twice at the peak (docs/performance.md, "Bytes read into the MLX array")."""
    data = mx.zeros((t.rows, t.row_bytes), mx.uint8, stream=mx.cpu)
    mx.eval(data)
    f.read_into(t.name, data)
    return data


@dataclass(frozen=True)
class Table:
    """``data`` is ``uint8 [vocab, row_bytes]``: row ``i`` is token ``i``'s blocks exactly as
    stored in the GGUF file. ``source`` says where the bytes came from."""

    data: mx.array
    format: Format
    dims: int
    vocab: int
    source: str = "memory"

    @property
    def qtype(self) -> str:
        return self.format.name

    @property
    def row_bytes(self) -> int:
        return self.format.row_bytes(self.dims)

    @property
    def nbytes(self) -> int:
        return self.vocab * self.row_bytes

    @classmethod
    def from_gguf(cls, source: str | Path | GGUFFile, tensor: str = "token_embd.weight", check: bool = False) -> Table:
        """Read ``tensor``'s bytes once, straight into a new MLX array, from ``source``: a path
        (opened and closed here) or a :class:`muser_mlx.gguf.GGUFFile` already open.

        Raises ``GGUFError`` (a ``ValueError``) naming the file, the tensor and the problem,
        also before reading when the bytes would not fit in memory, and when the file shrinks
        while they are read. ``check=True`` also runs :func:`muser_mlx.check_table` and raises
        ``GGUFError`` if any scale is NaN or Inf.
        """
        with opened(source) as f:
            info, fmt = table_tensor(f, tensor)
            where = f"{f.path}: tensor {tensor!r}"
            check_fits(info.nbytes, where)
            table = cls(_read_table(f, info), fmt, *info.shape, f"{f.path}:{tensor}")
        if check:
            report = check_table(table)
            if not report.ok:
                raise GGUFError(
                    f"{where}: {report.n_bad_blocks} blocks in {len(report.bad_rows)} rows have NaN or Inf "
                    f"scales; first bad rows: {', '.join(map(str, report.bad_rows[:10]))}"
                )
        return table

    @classmethod
    def from_bytes(cls, data, qtype: str, dims: int) -> Table:
        """A table from ``uint8 [vocab, row_bytes]`` bytes (NumPy, copied, or an ``mx.array``,
        used as it is) of type ``qtype``."""
        fmt = get_format(qtype)
        if dims <= 0 or dims % fmt.block_values:
            raise ValueError(f"dims {dims} is not a positive multiple of the {qtype} block of {fmt.block_values}")
        row_bytes = fmt.row_bytes(dims)
        if isinstance(data, np.ndarray):
            data = mx.array(np.ascontiguousarray(data).view(np.uint8))
        if data.dtype != mx.uint8 or data.ndim != 2 or data.shape[1] != row_bytes or data.shape[0] < 1:
            raise ValueError(
                f"{qtype} table of dims {dims} must be uint8 [vocab >= 1, {row_bytes}], "
                f"got {data.dtype} {list(data.shape)}"
            )
        return cls(data, fmt, dims, data.shape[0])

    def __repr__(self) -> str:
        return (
            f"Table({self.qtype}, vocab={self.vocab}, dims={self.dims}, "
            f"{self.nbytes / 2**20:.1f} MiB, source={self.source!r})"
        )
