"""Table: a quantized embedding table held as its raw bytes in MLX memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import numpy as np

from . import member_bytes
from .check import check_table
from .errors import GGUFError
from .formats import Format, get_format
from .gguf import GGUFFile, opened, table_tensor


def _check_bytes(data, fmt: Format, dims, vocab) -> None:
    """``ValueError`` unless ``data`` is an ``mx.array`` of ``uint8 [vocab, fmt.row_bytes(dims)]``
    (``vocab`` None: any count of at least one row), dims a positive int of whole blocks: the
    kernels read whole rows of that width, and a vocab the bytes do not hold would send ids past
    them."""
    if isinstance(dims, bool) or not isinstance(dims, (int, np.integer)) or dims <= 0 or dims % fmt.block_values:
        raise ValueError(f"dims {dims!r} is not a positive multiple of the {fmt.name} block of {fmt.block_values}")
    row_bytes = fmt.row_bytes(int(dims))
    rows = "vocab >= 1" if vocab is None else f"{vocab}"
    if (
        not isinstance(data, mx.array)
        or data.dtype != mx.uint8
        or data.ndim != 2
        or data.shape[1] != row_bytes
        or data.shape[0] < 1
        or (vocab is not None and data.shape[0] != vocab)
    ):
        got = type(data).__name__
        if isinstance(data, (mx.array, np.ndarray)):
            got = f"{str(data.dtype).rsplit('.', 1)[-1]} {list(data.shape)}"
        if isinstance(data, np.ndarray) and data.dtype == np.uint8:  # Table() given NumPy bytes
            got = f"NumPy {got}, not an mx.array (Table.from_bytes takes NumPy bytes)"
        raise ValueError(f"{fmt.name} table of dims {dims} must be uint8 [{rows}, {row_bytes}], got {got}")


@dataclass(frozen=True)
class Table:
    """``data`` is ``uint8 [vocab, row_bytes]``: row ``i`` is token ``i``'s blocks exactly as
    stored in the GGUF file. ``source`` says where the bytes came from. Built directly, the bytes'
    shape must be ``vocab`` rows of ``format.row_bytes(dims)`` (else ``ValueError``)."""

    data: mx.array
    format: Format
    dims: int
    vocab: int
    source: str = "memory"

    def __post_init__(self):
        if not isinstance(self.format, Format):
            raise TypeError(f"Table's format is a muser_mlx.formats.Format, got {type(self.format).__name__}")
        _check_bytes(self.data, self.format, self.dims, self.vocab)

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
            table = cls(member_bytes.read(f, info), fmt, *info.shape, f"{f.path}:{tensor}")
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
        used as it is) of type ``qtype``; bytes of another dtype or shape raise ``ValueError``."""
        fmt = get_format(qtype)
        if isinstance(data, np.ndarray) and data.dtype == np.uint8:
            data = mx.array(np.ascontiguousarray(data))
        _check_bytes(data, fmt, dims, None)
        return cls(data, fmt, int(dims), data.shape[0])

    def __repr__(self) -> str:
        return (
            f"Table({self.qtype}, vocab={self.vocab}, dims={self.dims}, "
            f"{self.nbytes / 2**20:.1f} MiB, source={self.source!r})"
        )
