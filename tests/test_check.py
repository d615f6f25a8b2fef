"""check_table finds exactly the blocks that dequantize to NaN or Inf (gguf-py is the oracle)."""

from __future__ import annotations

from unittest.mock import patch

import gguf
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from muser_mlx import FORMATS, Table, check, check_table
from muser_mlx.check import LISTED_BLOCKS
from muser_mlx.formats import FLOAT_KINDS

from conftest import random_table_bytes


def test_every_format_names_aligned_float_fields_inside_its_block():
    for fmt in FORMATS.values():
        width = FLOAT_KINDS[fmt.float_kind].word.size
        assert fmt.float_offsets and all(off % width == 0 and off + width <= fmt.block_bytes for off in fmt.float_offsets)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(FORMATS)), st.integers(1, 30), st.integers(1, 3), st.integers(0, 2**32 - 1), st.integers(0, 60),
       st.sampled_from([1, 7, check.CHUNK_FIELDS]))
def test_bad_blocks_are_the_non_finite_ones(qtype, vocab, blocks_per_row, seed, n_bad, chunk_fields):
    fmt = FORMATS[qtype]
    dims = fmt.block_values * blocks_per_row * (1 if fmt.block_values > 1 else 8)
    rng = np.random.default_rng(seed)
    data = random_table_bytes(rng, qtype, vocab, dims)
    offsets = fmt.float_offsets
    word, exponent, _ = FLOAT_KINDS[fmt.float_kind]
    width = word.size
    blocks = data.reshape(vocab, -1, fmt.block_bytes)
    for _ in range(n_bad):  # exponent all ones: Inf, or NaN where the mantissa is not 0
        r, b, off = rng.integers(vocab), rng.integers(blocks.shape[1]), offsets[rng.integers(len(offsets))]
        field = blocks[r, b, off:off + width].view(f"<u{width}")
        field |= exponent
    with patch.object(check, "CHUNK_FIELDS", chunk_fields):  # also several rows per MLX step
        report = check_table(Table.from_bytes(data, qtype, dims))

    with np.errstate(invalid="ignore", over="ignore"):  # Inf * 0 in the oracle
        values = gguf.quants.dequantize(data, gguf.GGMLQuantizationType[qtype])
    bad = ~np.isfinite(values.reshape(vocab, blocks.shape[1], -1)).all(axis=2)
    assert report.ok == (not bad.any())
    assert report.bad_rows == np.flatnonzero(bad.any(axis=1)).tolist()
    assert report.n_bad_blocks == int(bad.sum())
    assert report.bad_blocks == [tuple(p) for p in np.argwhere(bad)[:LISTED_BLOCKS].tolist()]
    assert ("no NaN or Inf" in str(report)) == report.ok


def test_report_reads_well():
    data = random_table_bytes(np.random.default_rng(0), "F16", 3, 4)
    data[1, 2:4] = np.array([np.inf], np.float16).view(np.uint8)  # row 1, value 1
    report = check_table(Table.from_bytes(data, "F16", 4))
    assert not report.ok and report.bad_rows == [1] and report.bad_blocks == [(1, 1)]
    assert str(report) == (
        "memory (F16, 3 rows): 1 blocks in 1 rows have NaN or Inf scales\n  rows: 1\n  first row:block: 1:1"
    )


def test_fp4_scales():
    """MXFP4: exactly the blocks whose E8M0 scale is 0xFF; NVFP4: every UE4M3 byte decodes to a
    finite scale (gguf-py agrees), so no block, whatever its scale bytes."""
    rng = np.random.default_rng(1)
    mxfp4 = rng.integers(0, 256, (256, 17), dtype=np.uint8)
    mxfp4[:, 0] = np.arange(256)
    report = check_table(Table.from_bytes(mxfp4.reshape(16, -1), "MXFP4", 512))
    assert report.bad_rows == [15] and report.bad_blocks == [(15, 15)] and report.n_bad_blocks == 1
    nvfp4 = rng.integers(0, 256, (64, 36), dtype=np.uint8)
    nvfp4[:, :4] = np.arange(256).reshape(64, 4)
    assert check_table(Table.from_bytes(nvfp4.reshape(8, -1), "NVFP4", 512)).ok
    assert np.isfinite(gguf.quants.dequantize(nvfp4, gguf.GGMLQuantizationType.NVFP4)).all()
