"""Plot recorded benchmark results: benchmarks/results/<stem>_<device>.json -> .png beside it.

python benchmarks/plot.py results/gather_gpu.json
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def plot(path: Path) -> Path:
    data = json.loads(path.read_text())
    series = defaultdict(list)
    for run in data["runs"]:
        if isinstance(run["ids"], int):
            series[run["name"]].append((run["ids"], run.get("queued_bytes_per_s", run.get("bytes_per_s"))))
    fig, ax = plt.subplots(figsize=(8, 5))
    for name, points in series.items():
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, [y / 1e9 for y in ys], marker="o", label=name)
    ax.axhline(data["copy_bytes_per_s"] / 1e9, color="gray", linestyle="--", label="copy bandwidth")
    ax.set(
        xscale="log",
        xlabel="ids per lookup",
        ylabel="effective GB/s, lookups queued (rows read + output written)",
        title=f"{path.stem}: {data['machine']}",
    )
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    out = path.with_suffix(".png")
    fig.savefig(out, dpi=120, bbox_inches="tight")
    return out


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(plot(Path(arg)))
