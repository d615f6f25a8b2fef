"""Table: a quantized embedding table held as its raw bytes in MLX memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from .check import check_table
from .errors import GGUFError
from .formats import Format, get_format
from .gguf import read_tensor
from .memory import check_fits


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
    def from_gguf(cls, path: str | Path, tensor: str = "token_embd.weight", check: bool = False) -> "Table":
        """Memory-map ``path`` and copy ``tensor``'s bytes once into an MLX array.

        Raises ``GGUFError`` (a ``ValueError``) naming the file, the tensor and the problem,
        also before copying when the bytes would not fit in memory. ``check=True`` also runs
        :func:`muser_mlx.check_table` and raises ``GGUFError`` if any scale is NaN or Inf.
        """
        t = read_tensor(path, tensor)
        where = f"{t.path}: tensor {t.name!r}"
        check_fits(t.data.nbytes, where)
        table = cls(mx.array(t.data), t.format, t.dims, t.vocab, f"{t.path}:{t.name}")
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
