"""Timing helpers shared by the benchmarks: medians of evaluated lookups, copy bandwidth,
the Glimmer-shaped random tables, and result files with the machine, date and MLX version."""

from __future__ import annotations

import ast
import datetime
import json
import platform
import statistics
import time
from pathlib import Path

import mlx.core as mx
import numpy as np

RESULTS = Path(__file__).parent / "results"
# The token embedding of Muse Glimmer (mlx-lm's muse_glimmer): 6,656 values per row, 202,048 rows.
GLIMMER = dict(dims=6656, vocab=202048)


def tuning_constants(text: str) -> dict:
    """``"NAME=VALUE;NAME=VALUE"`` (Python literals) -> the keyword arguments of
    ``muser_mlx.backends.tuning.fixed``."""
    pairs = (item.split("=", 1) for item in text.split(";") if item)
    return {name.strip(): ast.literal_eval(value) for name, value in pairs}


def fresh_ids(vocab: int, n: int):
    """``make_args`` for the timers: ``i`` -> (``n`` random ids below ``vocab``, seeded by ``i``)."""
    return lambda i: (mx.random.randint(0, vocab, (n,), key=mx.random.key(i)),)


def sample_seconds(make_args, fn, reps: int, warmup: int = 3) -> list[float]:
    """Wall times of ``mx.eval(fn(*args))``, fresh ``args = make_args(i)`` each rep (built and
    evaluated before the clock starts), after ``warmup`` untimed reps."""
    times = []
    for i in range(warmup + reps):
        args = make_args(i)
        mx.eval(args)
        t0 = time.perf_counter()
        mx.eval(fn(*args))
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return times


def median_seconds(make_args, fn, reps: int, warmup: int = 3) -> float:
    """Median of :func:`sample_seconds`."""
    return statistics.median(sample_seconds(make_args, fn, reps, warmup))


def alternating_medians(calls: dict, reps: int, rounds: int = 20, warmup: int = 10) -> dict:
    """{name: median seconds} of ``calls`` {name: (make_args, fn)} timed as :func:`sample_seconds`
    in ``rounds`` blocks of ``reps // rounds`` each after ``warmup`` untimed, the names' order
    reversed every other round: one evaluation's time drifts with the machine (an H200's 1-id
    lookups between 28 and 42 us, from run to run and within one), and with short blocks and
    many rounds the drift falls on every name alike. Each block is timed in its steady state,
    the same graph evaluated again and again as in a model's decode loop; evaluations
    interleaved one by one measure a different thing (docs/performance.md, "Timing")."""
    samples = {name: [] for name in calls}
    for r in range(rounds):
        for name in list(calls)[:: 1 if r % 2 == 0 else -1]:
            make_args, fn = calls[name]
            samples[name] += sample_seconds(make_args, fn, max(1, reps // rounds), warmup)
    return {name: statistics.median(t) for name, t in samples.items()}


def queued_seconds(make_args, fn, reps: int, calls: int, warmup: int = 2) -> tuple[float, float]:
    """Per call, median over ``reps``: (device, host) seconds of calls queued in one evaluation,
    the throughput a model sees when its calls queue behind each other, as they do inside one
    forward pass. Each rep evaluates ``calls`` calls of ``fn(*make_args(j))`` (fresh ``j``) in
    one ``mx.eval``, then ``2 * calls`` in another; device = the difference of the two evaluations'
    times / ``calls``, so an evaluation's fixed cost (its sync, its first launch: 40-130 us on an
    H200) cancels instead of being shared among the calls. Host = the time spent building the
    graphs (Python and MLX), per call."""
    device, host = [], []
    for i in range(warmup + reps):
        built, evaluated = [], []  # seconds for calls, then 2 * calls
        for count in (calls, 2 * calls):
            args = [make_args(3 * calls * i + (count - calls) + j) for j in range(count)]
            mx.eval(args)
            t0 = time.perf_counter()
            outs = [fn(*a) for a in args]
            t1 = time.perf_counter()
            mx.eval(outs)
            evaluated.append(time.perf_counter() - t1)
            built.append(t1 - t0)
            del outs
        if i >= warmup:
            host.append(built[1] / (2 * calls))
            device.append((evaluated[1] - evaluated[0]) / calls)
    return statistics.median(device), statistics.median(host)


def mlx_q4_linear(dims: int, vocab: int):
    """MLX's 4-bit ``nn.QuantizedLinear`` (group 64) of a ``[vocab, dims]`` weight, its scales and
    biases in float16 as for float16 x (float32 ones would time MLX's mixed-dtype path), evaluated."""
    from mlx import nn

    q4 = nn.QuantizedLinear(dims, vocab, bias=False, group_size=64, bits=4)
    q4.scales, q4.biases = q4.scales.astype(mx.float16), q4.biases.astype(mx.float16)
    mx.eval(q4.parameters())
    return q4


def copy_bandwidth(gib: float = 1.0, reps: int = 10) -> float:
    """Bytes/s of a large elementwise float32 op (reads and writes ``gib`` GiB each), queued
    (:func:`queued_seconds`): the device's own rate, which the ratios against it compare with."""
    x = mx.random.uniform(shape=(int(gib * 2**28),))
    return 2 * x.nbytes / queued_seconds(lambda i: (x,), lambda a: a + 1.0, reps, calls=2)[0]


def zero_table(qtype: str, vocab: int, dims: int):
    """A ``qtype`` Table of ``vocab`` rows of ``dims`` values whose bytes are a lazy array of zeros,
    never made: for a kernel's choice and launch."""
    from muser_mlx import FORMATS, Table

    fmt = FORMATS[qtype]
    return Table(mx.zeros((vocab, fmt.row_bytes(dims)), mx.uint8), fmt, dims, vocab)


def random_q_bytes(qtype: str, vocab: int, dims: int, seed: int = 0) -> np.ndarray:
    """uint8 [vocab, row_bytes]: random blocks whose float fields (scales, or the values of the
    float formats) hold finite values drawn like a trained table's."""
    from muser_mlx import FORMATS
    from muser_mlx.formats import FLOAT_KINDS

    fmt = FORMATS[qtype]
    if dims % fmt.block_values:
        raise ValueError(f"{qtype} rows are whole blocks of {fmt.block_values} values; dims {dims} is not")
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(vocab * dims // fmt.block_values, fmt.block_bytes), dtype=np.uint8)
    scale = 0.02 if fmt.block_values == 1 else 1e-3
    size = FLOAT_KINDS[fmt.float_kind].word.size
    words = np.stack([blocks[:, off : off + size].copy().view(f"<u{size}")[:, 0] for off in fmt.float_offsets], axis=-1)
    values = rng.normal(0, scale, fmt.float_fields(words).shape).astype(np.float32)
    fields = {
        "f16": lambda: values.astype(np.float16).view(np.uint16),
        "f32": lambda: values.view(np.uint32),
        "bf16": lambda: (values.view(np.uint32) >> 16).astype(np.uint16),
        # E8M0 2^(e - 127) and UE4M3 (exponent bits 3-6, bias 7) near |values|
        "e8m0": lambda: (127 + np.round(np.log2(np.abs(values) + 1e-30))).astype(np.uint8),
        "ue4m3": lambda: (
            (np.clip(7 + np.round(np.log2(np.abs(values) + 1e-30)), 1, 14).astype(np.uint8) << 3)
            | rng.integers(0, 8, values.shape, dtype=np.uint8)
        ),
    }[fmt.float_kind]()
    words = fmt.spread_float_fields(words, fields)  # a float spread over words (IQ1_M's d) goes back
    for k, off in enumerate(fmt.float_offsets):
        blocks[:, off : off + size] = words[:, k : k + 1].view(np.uint8)
    return blocks.reshape(vocab, fmt.row_bytes(dims))


def device_name() -> str:
    return mx.device_info().get("device_name", str(mx.default_device()))


def machine() -> str:
    return (
        f"{device_name()} ({mx.default_device()}); {platform.machine()}; MLX {mx.__version__}; {datetime.date.today()}"
    )


def save(stem: str, title: str, table_md: str, data: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    slug = "gpu" if mx.default_device() == mx.gpu else "cpu"
    md = RESULTS / f"{stem}_{slug}.md"
    md.write_text(f"# {title}\n\n{machine()}\n\n{table_md}\n")
    (RESULTS / f"{stem}_{slug}.json").write_text(json.dumps({"machine": machine(), **data}, indent=1))
    return md


def markdown(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)
