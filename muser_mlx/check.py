"""check_table: which rows and blocks of a table hold NaN or Inf scales, without dequantizing.

A block's floats are its scale fields (``d``, ``dmin``, MXFP4's E8M0 ``e``) or, for the float
formats, its one value. A float is NaN or Inf exactly when its exponent bits are all ones (an E8M0
scale of 0xFF: NaN in OCP MX, a block ggml's loader refuses), so the check reads those fields'
bits straight from the table's bytes with MLX ops. NVFP4's UE4M3 scales are all finite (ggml
reads E4M3's NaN, 0x7F, as 0): its tables always pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import mlx.core as mx
import numpy as np

from .formats import FLOAT_KINDS, Format

LISTED_BLOCKS = 20  # (row, block) pairs kept in a report; the count covers all
CHUNK_FIELDS = 1 << 22  # fields examined per MLX step, bounding temporaries to a few MiB


@dataclass(frozen=True)
class TableReport:
    """What :func:`check_table` found. ``bad_rows``: sorted ids of rows with a NaN or Inf
    scale; ``bad_blocks``: the first ``(row, block)`` pairs (block = index within the row);
    ``n_bad_blocks``: how many blocks in all."""

    source: str
    qtype: str
    vocab: int
    bad_rows: list[int]
    bad_blocks: list[tuple[int, int]]
    n_bad_blocks: int

    @property
    def ok(self) -> bool:
        return self.n_bad_blocks == 0

    def __str__(self) -> str:
        if self.ok:
            return f"{self.source} ({self.qtype}, {self.vocab} rows): no NaN or Inf scales"
        rows = ", ".join(map(str, self.bad_rows[:LISTED_BLOCKS]))
        more = f" (and {len(self.bad_rows) - LISTED_BLOCKS} more)" if len(self.bad_rows) > LISTED_BLOCKS else ""
        blocks = ", ".join(f"{r}:{b}" for r, b in self.bad_blocks)
        return (
            f"{self.source} ({self.qtype}, {self.vocab} rows): {self.n_bad_blocks} blocks in "
            f"{len(self.bad_rows)} rows have NaN or Inf scales\n  rows: {rows}{more}\n  first row:block: {blocks}"
        )


def _bad_fields(rows: mx.array, fmt: Format) -> mx.array:
    """uint8 [n, row_bytes] -> bool [n, blocks per row]: any scale field NaN or Inf."""
    kind = FLOAT_KINDS[fmt.float_kind]
    width = kind.word.size
    words = mx.view(rows, kind.word).reshape(rows.shape[0], -1, fmt.block_bytes // width)
    if not kind.special:
        return mx.zeros(words.shape[:2], mx.bool_)
    fields = fmt.float_fields(words[:, :, [off // width for off in fmt.float_offsets]])
    return ((fields & kind.exponent) == kind.exponent).any(axis=2)


def check_table(table) -> TableReport:
    """Find the rows and blocks of ``table`` whose scales (f16 ``d``/``dmin``, E8M0 ``e``; for F16,
    BF16 and F32 tables the values themselves) are NaN or Inf. Reads only those fields' bytes."""
    fmt = table.format
    n_blocks = table.row_bytes // fmt.block_bytes
    step = max(1, CHUNK_FIELDS // (n_blocks * len(fmt.float_offsets)))
    per_row = np.concatenate(
        [np.array(_bad_fields(table.data[r : r + step], fmt).sum(axis=1)) for r in range(0, table.vocab, step)]
    )  # [vocab] bad blocks per row
    bad_rows = np.flatnonzero(per_row)
    listed = bad_rows[np.cumsum(per_row[bad_rows]) - per_row[bad_rows] < LISTED_BLOCKS]
    pairs = []
    if listed.size:
        mask = np.array(_bad_fields(table.data[mx.array(listed)], fmt))
        pairs = [(int(listed[i]), int(b)) for i, b in np.argwhere(mask)[:LISTED_BLOCKS]]
    return TableReport(table.source, table.qtype, table.vocab, bad_rows.tolist(), pairs, int(per_row.sum()))
