"""Fuzz the GGUF reader and loader: corrupt small valid files, load each, demand GGUFError or a
faithful table and header.

    PYTHONPATH=$PWD python benchmarks/fuzz_gguf.py --minutes 5

The parent process runs batches in worker subprocesses, so that a segfault, an abort or a hang
in a worker is caught, counted and its input kept (in ``benchmarks/results/fuzz_crashes/``)
instead of ending the run. Each input is a valid file from ``tests/gguf_files.write_gguf``
(Q4_K or F16, vocab 1-6) with 1-4 corruptions (bit flips, byte writes, u32/u64 writes of
boundary values, truncations), three in four of them placed in the header, metadata and
tensor-info bytes. The rule checked is ``tests/gguf_files.check_outcome`` (the table's bytes and
rows, and every metadata value and tensor info ``open_gguf`` reads, against gguf-py's
``GGUFReader``). Results go to
``benchmarks/results/fuzz_gguf.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
BATCH = 2000  # inputs per worker process
BATCH_TIMEOUT_S = 300  # a batch that runs longer than this has hung


def random_ops(rng, header_bytes: int, size: int) -> list[tuple]:
    from gguf_files import INTERESTING_U64

    ops = []
    for _ in range(rng.integers(1, 5)):
        pos = int(rng.integers(0, header_bytes) if rng.random() < 0.75 else rng.integers(0, size))
        kind = ["flip", "byte", "u32", "u64", "truncate"][rng.integers(0, 5)]
        if kind == "flip":
            ops.append((kind, pos, int(rng.integers(0, 8))))
        elif kind == "byte":
            ops.append((kind, pos, int(rng.integers(0, 256))))
        elif kind == "truncate":
            ops.append((kind, pos))
        else:
            value = (
                INTERESTING_U64[rng.integers(0, len(INTERESTING_U64))]
                if rng.random() < 0.6
                else int(rng.integers(0, 2**63)) * 2
            )
            ops.append((kind, pos, value))
    return ops


def worker(seed: int, count: int, scratch: Path) -> None:
    """Run ``count`` inputs; print one JSON line of outcome counts. Before each input, its bytes
    are written to ``scratch/current.gguf``, so the parent can keep what a crash left there."""
    # this checkout's muser_mlx and tests' helpers first, then the inherited path (where mlx may be
    # installed by pip --target)
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    import numpy as np

    from gguf_files import check_outcome, mutate, tensor_info_offsets, write_gguf

    rng = np.random.default_rng(seed)
    bases = []
    for qtype, dims in (("Q4_K", 256), ("F16", 8)):
        for vocab in (1, 3, 6):
            path = scratch / f"base-{qtype}-{vocab}.gguf"
            write_gguf(path, qtype, vocab, dims, seed=seed + vocab)
            bases.append((path.read_bytes(), tensor_info_offsets(path)["data"]))
    current, outcomes, failures = scratch / "current.gguf", Counter(), []
    for i in range(count):
        data, header = bases[rng.integers(0, len(bases))]
        current.write_bytes(mutate(data, random_ops(rng, header, len(data))))
        try:
            outcomes[check_outcome(current)] += 1
        except Exception as e:  # anything but GGUFError or a faithful table
            outcomes["failure"] += 1
            keep = scratch / f"failure-{seed}-{i}.gguf"
            keep.write_bytes(current.read_bytes())
            failures.append(f"{keep.name}: {type(e).__name__}: {e}"[:300])
    print(json.dumps({"outcomes": outcomes, "failures": failures}))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=BATCH, help=argparse.SUPPRESS)
    ap.add_argument("--scratch", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.worker, args.count, args.scratch)

    import mlx.core as mx

    crashes_dir = RESULTS / "fuzz_crashes"
    totals, failures, crashes, batches = Counter(), [], [], 0
    start, seed = time.monotonic(), args.seed
    while time.monotonic() - start < args.minutes * 60:
        with tempfile.TemporaryDirectory() as scratch:
            cmd = [sys.executable, __file__, "--worker", str(seed), "--count", str(BATCH), "--scratch", scratch]
            try:
                run = subprocess.run(
                    cmd,
                    capture_output=True,
                    text=True,
                    timeout=BATCH_TIMEOUT_S,
                )
                problem = None if run.returncode == 0 else f"exit status {run.returncode}: {run.stderr[-300:]}"
            except subprocess.TimeoutExpired:
                run, problem = None, f"no result after {BATCH_TIMEOUT_S} s (a hang)"
            kept = sorted(Path(scratch).glob("failure-*.gguf"))
            if problem:  # the worker died or hung on (at the latest) the input in current.gguf
                kept.append(Path(scratch) / "current.gguf")
                crashes.append(f"seed {seed}: {problem}")
            else:
                result = json.loads(run.stdout.strip().splitlines()[-1])
                totals.update(result["outcomes"])
                failures += result["failures"]
            for path in kept:
                crashes_dir.mkdir(parents=True, exist_ok=True)
                (crashes_dir / f"{seed}-{path.name}").write_bytes(path.read_bytes())
        batches += 1
        seed += 1
        tried = sum(totals.values())
        print(f"{time.monotonic() - start:6.0f} s  {tried} inputs  {dict(totals)}  crashes: {len(crashes)}", flush=True)

    minutes = (time.monotonic() - start) / 60
    tried = sum(totals.values())
    lines = [
        "# Fuzzing the GGUF reader and loader",
        "",
        f"`benchmarks/fuzz_gguf.py --minutes {args.minutes:g} --seed {args.seed}`: corrupted small valid GGUF files",
        "(Q4_K / F16 `token_embd.weight`, vocab 1-6, with metadata arrays and a second tensor), 1-4",
        "corruptions each (bit flips, byte writes, u32/u64 boundary values, truncations; 3 in 4 placed",
        "in the header / metadata / tensor-info bytes). Rule: `Table.from_gguf` (the package's own",
        "header reader, `muser_mlx.gguf.open_gguf`) raises `GGUFError`, or returns a table whose bytes",
        "are those gguf-py's `GGUFReader` reads and whose rows equal `gguf.quants.dequantize` of them",
        "(NaN matching NaN), and `open_gguf` reads every metadata value (arrays in full) and tensor info",
        "that gguf-py reads. Workers are subprocesses, so a segfault or hang would be counted as a crash.",
        "",
        "| date (UTC) | machine | Python / MLX / gguf | minutes | inputs tried | GGUFError | table (rows checked) | rule broken | crashes or hangs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        f"| {datetime.now(timezone.utc):%Y-%m-%d %H:%M} | {machine()} | {platform.python_version()} / {mx.__version__} / "
        f"{version('gguf')} | {minutes:.1f} | {tried} | {totals['error']} | {totals['table']} | "
        f"{totals['failure']} | {len(crashes)} |",
        "",
    ]
    if failures or crashes:
        lines += ["Problems (inputs kept in `benchmarks/results/fuzz_crashes/`):", ""]
        lines += [f"- {p}" for p in failures + crashes] + [""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fuzz_gguf.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
