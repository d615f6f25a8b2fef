"""The bytes of a GGUF table that one member of a group keeps, taken from the table in memory or
read from its file, that member's part only.

A part is a list of pieces ``(start, stop)``: of the rows (``uint8 [rows, row_bytes]``: output
features, tokens) or of the values of every row (input features), the latter whole blocks, so
a piece of values ``[a, b)`` is the bytes ``[a / block_values * block_bytes, b / ...)`` of each row.
"""

from __future__ import annotations

import itertools

import mlx.core as mx
import numpy as np

from .formats import Format
from .gguf import GGUFFile, TensorInfo
from .gguf_values import is_integer, is_number
from .memory import check_fits

Pieces = list[tuple[int, int]]
COLUMN_READ_BYTES = 1 << 24  # whole rows read at a time where a member keeps some columns of each


def vocab_rows(rows: int, group: mx.distributed.Group) -> tuple[int, int]:
    """``(start, stop)``: the rows member ``group.rank()`` keeps of a table of ``rows`` rows.

    Raises ``ValueError`` when the split leaves some member no rows (``rows`` at most
    ``ceil(rows / N) * (N - 1)``)."""
    size, rank = group.size(), group.rank()
    per_member = -(-rows // size)
    if per_member * (size - 1) >= rows:
        raise ValueError(
            f"a vocabulary of {rows} rows cannot be split over {size} members: "
            f"{per_member} rows each leave the last member none"
        )
    return rank * per_member, min((rank + 1) * per_member, rows)


def check_segments(segments) -> None:
    """``TypeError`` unless ``segments`` is what MLX's ``shard_linear`` takes: a count (an int),
    or a list of indices (ints) or fractions (floats)."""
    if is_integer(segments):
        return
    if not isinstance(segments, (list, tuple)) or not all(is_number(s) for s in segments):
        raise TypeError(f"segments must be a count or a list of indices or fractions, got {segments!r}")


def split_pieces(total: int, segments: int | list, group: mx.distributed.Group, what: str) -> Pieces:
    """Member ``group.rank()``'s pieces of ``total`` features as MLX's ``_shard`` takes them: the
    features cut into ``segments`` (a count of equal parts, a list of indices, or a list of
    fractions of ``total``), each part into ``group.size()`` equal pieces. ``ValueError`` naming
    ``what`` where a part does not divide."""
    check_segments(segments)
    size, rank = group.size(), group.rank()
    if isinstance(segments, int):
        if segments < 1 or total % segments:
            raise ValueError(f"{what}: {total} features cannot be cut into {segments} equal segments")
        cuts = [total * i // segments for i in range(1, segments)]
    else:
        cuts = [s if isinstance(segments[0], int) else int(s * total) for s in segments]
    bounds = [0, *cuts, total]
    pieces = []
    for start, stop in itertools.pairwise(bounds):
        if not 0 <= start <= stop <= total or (stop - start) % size:
            raise ValueError(
                f"{what}: the segment [{start}, {stop}) of {total} features cannot be split into {size} equal pieces"
            )
        width = (stop - start) // size
        pieces.append((start + rank * width, start + (rank + 1) * width))
    return pieces


def byte_pieces(pieces: Pieces, fmt: Format, what: str) -> Pieces:
    """Pieces of a row's values -> pieces of its bytes; ``ValueError`` naming ``what`` where a
    piece is not a whole number of the format's blocks."""
    for start, stop in pieces:
        if start % fmt.block_values or stop % fmt.block_values:
            raise ValueError(
                f"{what}: the input features [{start}, {stop}) are not a whole number of {fmt.name} blocks of "
                f"{fmt.block_values} values: each member must hold whole blocks of every row"
            )
    return [
        (start // fmt.block_values * fmt.block_bytes, stop // fmt.block_values * fmt.block_bytes)
        for start, stop in pieces
    ]


def take(data: mx.array, rows: Pieces | None = None, columns: Pieces | None = None) -> mx.array:
    """A copy of ``data``'s ``rows`` pieces (axis 0) and, of those, its ``columns`` pieces (the
    last axis), each concatenated in order; None keeps the axis whole."""
    if rows is not None:
        data = mx.concatenate([data[a:b] for a, b in rows], axis=0)
    if columns is not None:
        data = mx.concatenate([data[..., a:b] for a, b in columns], axis=-1)
    return mx.contiguous(data)


def read(f: GGUFFile, info: TensorInfo, rows: Pieces | None = None, columns: Pieces | None = None) -> mx.array:
    """``uint8 [sum of rows, sum of columns]``: these bytes of tensor ``info`` of ``f`` (``columns``
    in bytes, :func:`byte_pieces`; both None: the whole tensor), read into a new MLX array, no
    other byte of the tensor held beyond :data:`COLUMN_READ_BYTES` of whole rows at a time.
    ``GGUFError`` where they would not fit in memory, or the file shrank. The array is evaluated
    on the CPU stream first (a fresh, contiguous buffer that no other array shares) and the file
    read straight into its memory: a NumPy array copied into MLX would hold the bytes twice at the
    peak (docs/performance.md, "Bytes read into the MLX array")."""
    part = "" if rows is None and columns is None else ", this member's part"
    rows = rows or [(0, info.rows)]
    columns = columns or [(0, info.row_bytes)]
    height, width = sum(b - a for a, b in rows), sum(b - a for a, b in columns)
    check_fits(height * width, f"{f.path}: tensor {info.name!r}{part}")
    data = mx.zeros((height, width), mx.uint8, stream=mx.cpu)
    mx.eval(data)
    out = np.asarray(memoryview(data))  # writable, the array's own memory
    done = 0
    if width == info.row_bytes:
        for start, stop in rows:
            f.read_into(info.name, out[done : done + stop - start], rows=(start, stop))
            done += stop - start
        return data
    step = max(1, COLUMN_READ_BYTES // info.row_bytes)
    whole = np.empty((min(step, info.rows), info.row_bytes), np.uint8)
    for start, stop in rows:
        for first in range(start, stop, step):
            last = min(first + step, stop)
            f.read_into(info.name, whole[: last - first], rows=(first, last))
            out[done : done + last - first] = np.concatenate([whole[: last - first, a:b] for a, b in columns], axis=1)
            done += last - first
    return data
