"""The demo: float table -> Q4_K bytes -> GGUF file -> Table (its bytes read once) -> lazy lookup,
checked bit for bit against gguf-py (the llama.cpp authors' NumPy dequantization)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import gguf
import mlx.core as mx
import numpy as np

from .embedding import Embedding
from .gguf import open_gguf
from .quantize import quantize
from .table import Table
from .writer import save_gguf

VOCAB, DIMS, BATCH = 8192, 1024, 512


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def _make_file(folder: Path, say) -> Path:
    rng = np.random.default_rng(0)
    weights = rng.normal(0, 0.02, (VOCAB, DIMS)).astype(np.float32)
    t0 = time.perf_counter()
    q = quantize(weights, "Q4_K", progress=False)
    say(
        f"quantized a float32 [{VOCAB}, {DIMS}] table ({weights.nbytes / 2**20:.0f} MiB) to Q4_K "
        f"({q.nbytes / 2**20:.1f} MiB) in {_ms(time.perf_counter() - t0)}"
    )
    path = save_gguf(
        folder / "demo-Q4_K.gguf",
        {"token_embd.weight": Table.from_bytes(q, "Q4_K", DIMS)},
        {"general.name": "muser_mlx demo", "llama.embedding_length": DIMS},
    )
    say(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return path


def run(path: Path | None = None, tensor: str = "token_embd.weight", say=print) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = path or _make_file(Path(folder), say)
        t0 = time.perf_counter()
        emb = Embedding.from_gguf(path, tensor)
        mx.eval(emb.weight)
        t = emb.table
        say(f"loaded {t} in {_ms(time.perf_counter() - t0)} (header read once, bytes read straight into MLX memory)")
        f32 = 4 * t.vocab * t.dims
        say(
            f"held: {t.nbytes / 2**20:.1f} MiB of {t.qtype} bytes; a float32 table would be "
            f"{f32 / 2**20:.1f} MiB ({f32 / t.nbytes:.1f}x); MLX active memory {mx.get_active_memory() / 2**20:.1f} MiB"
        )

        ids = mx.random.randint(0, t.vocab, (BATCH,), key=mx.random.key(1))
        t0 = time.perf_counter()
        rows = emb(ids)
        built = time.perf_counter() - t0
        mx.eval(rows)
        say(
            f"looked up {BATCH} ids on {mx.default_device()} ({emb.table.qtype} -> float32 "
            f"{list(rows.shape)}): graph built in {_ms(built)}, evaluated in {_ms(time.perf_counter() - t0 - built)}"
        )

        with open_gguf(path) as f:
            raw = f.read(tensor)
        expected = gguf.quants.dequantize(raw[np.array(ids)], gguf.GGMLQuantizationType[t.qtype])
        same = np.array_equal(np.array(rows).view(np.uint32), expected.view(np.uint32))
        say(f"gguf-py's dequantization of the same rows: {'bit-identical' if same else 'DIFFERENT'}")
        if not same:
            raise SystemExit("demo: rows differ from gguf-py")
