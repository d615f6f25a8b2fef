"""Float -> GGUF blocks: ``quantize(weights, qtype)`` for every format with a quantizer.

The quantizers are registered on the formats themselves (``FORMATS[qtype].quantizer``): Q4_K is
ggml's reference quantizer ``quantize_row_q4_K_ref`` (formats/q4_k_quantizer.py), byte-identical to
llama.cpp's without an importance matrix; F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0
and MXFP4 are gguf-py's (``gguf.quants.quantize``, written by the llama.cpp authors after ggml's
``quantize_row_*_ref``). This module checks the input and runs the quantizer over chunks of rows
on every CPU.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import mlx.core as mx
import numpy as np

from .check import check_table
from .formats import FORMATS
from .table import Table

_CHUNK_VALUES = 1 << 19  # values per work item ([32, 16384] float32 temporaries: 2 MiB)
_AUTO_PROGRESS_VALUES = 8_000_000

QUANTIZABLE = [name for name, fmt in FORMATS.items() if fmt.quantizer is not None]


def _as_numpy(weights) -> np.ndarray:
    """``weights`` for the checks: a NumPy array as it is, an ``mx.array`` as float32 (NumPy has no
    bfloat16) unless complex, anything else in the dtype NumPy gives it."""
    if isinstance(weights, mx.array):
        if mx.issubdtype(weights.dtype, mx.complexfloating):  # astype would drop the imaginary parts
            raise ValueError(f"expected real numbers, got dtype {weights.dtype}")
        return np.array(weights.astype(mx.float32))
    return weights if isinstance(weights, np.ndarray) else np.array(weights)


def quantize(weights, qtype: str = "Q4_K", progress=None) -> np.ndarray:
    """Quantize float `weights` [rows, cols] (cols a multiple of the format's block, 256 for
    Q4_K) to `qtype`, one of :data:`QUANTIZABLE`.

    Returns uint8 [rows, row_bytes]: each row is that row's GGUF blocks (144 bytes per 256 values
    for Q4_K), the layout `gguf.GGUFReader` exposes for quantized tensors.
    `progress`: True/False, or None for a bar on stderr when there are > ~8M values.

    Raises ``ValueError`` for a NaN or Inf value, a value beyond float32, complex values, and
    values too large for the format (a scale past float16's 65,504, e.g. Q8_0 beyond about 8.3e6,
    F16 beyond 65,504): no block comes back with a NaN or Inf in it.
    """
    fmt = FORMATS.get(qtype)
    if fmt is None or fmt.quantizer is None:
        raise ValueError(f"unsupported qtype {qtype!r}; supported: {', '.join(QUANTIZABLE)}")
    x = _as_numpy(weights)
    if np.iscomplexobj(x) or not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise ValueError(f"expected real numbers, got dtype {x.dtype}")
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D [rows, cols] array, got shape {x.shape}")
    rows, cols = x.shape
    if cols < 1 or cols % fmt.block_values:
        raise ValueError(f"cols ({cols}) must be a positive multiple of {fmt.block_values} for {qtype}")
    step = max(1, _CHUNK_VALUES // cols)
    for r0 in range(0, rows, step):  # validate everything before any work
        chunk = x[r0 : r0 + step]
        for finite, what in (
            (np.isfinite(chunk).all(axis=1), "non-finite value (NaN or Inf)"),
            (np.isfinite(_float32(chunk)).all(axis=1), "value beyond float32's range"),
        ):
            if not finite.all():
                raise ValueError(f"{what} in row {r0 + int(np.argmin(finite))}")

    out = np.empty((rows, fmt.row_bytes(cols)), dtype=np.uint8)

    def work(r0: int) -> int:
        chunk = _float32(x[r0 : r0 + step])
        with np.errstate(over="ignore"):  # a scale past float16: _check_scales raises for it
            out[r0 : r0 + len(chunk)] = fmt.quantizer(chunk).reshape(len(chunk), -1)
        return len(chunk)

    show = progress if progress is not None else rows * cols > _AUTO_PROGRESS_VALUES
    bar = _progress_bar(rows, f"quantize {qtype}") if show else None
    # NumPy releases the GIL inside its loops, so threads give real parallelism here.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for n in pool.map(work, range(0, rows, step)):
            if bar:
                bar.update(n)
    if bar:
        bar.close()
    _check_scales(out, qtype, cols)
    return out


def _float32(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond float32: Inf, which the validation reports
        return np.asarray(values, dtype=np.float32)


def _check_scales(out: np.ndarray, qtype: str, cols: int) -> None:
    """``ValueError`` naming the first row whose blocks came out with a NaN or Inf scale (values
    too large for the format's float16 scales)."""
    if len(out) == 0:
        return
    report = check_table(Table.from_bytes(out, qtype, cols))
    if not report.ok:
        raise ValueError(
            f"values too large for {qtype}: {report.n_bad_blocks} blocks in {len(report.bad_rows)} rows would "
            f"have NaN or Inf scales (float16 stops at 65,504); first row {report.bad_rows[0]}"
        )


def _progress_bar(total: int, desc: str):
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="row", file=sys.stderr)
    except ImportError:
        return _LineProgress(total, desc)


class _LineProgress:
    """Minimal tqdm stand-in: prints a percentage line to stderr every ~5% / 10 s."""

    def __init__(self, total: int, desc: str):
        self.total, self.desc, self.done, self.shown, self.t0 = total, desc, 0, -1, time.time()
        self.t_last = self.t0

    def update(self, n: int) -> None:
        self.done += n
        pct = 100 * self.done // max(self.total, 1)
        now = time.time()
        if pct // 5 > self.shown // 5 or now - self.t_last > 10 or self.done == self.total:
            self.shown, self.t_last = pct, now
            print(
                f"{self.desc}: {pct:3d}% ({self.done}/{self.total} rows, {now - self.t0:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        pass
