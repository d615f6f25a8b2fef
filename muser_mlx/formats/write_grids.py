"""Write the IQ grids' kernel headers, kernels/<grid>.h, and the selector grids' sign bits,
kernels/ksigns_selectors.h, from gguf-py's tables (grids.py).

python -m muser_mlx.formats.write_grids [--folder kernels/]
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from pathlib import Path

from .grids import GRIDS, KSIGNS_SELECTORS, ksigns_selectors_header


def write_headers(folder: Path) -> list[Path]:
    texts = {grid.kernel_file: grid.header() for grid in GRIDS.values()}
    texts[f"{KSIGNS_SELECTORS}.h"] = ksigns_selectors_header()
    for name, text in texts.items():
        (folder / name).write_text(text)
    return [folder / name for name in texts]


def main() -> None:
    p = argparse.ArgumentParser(description="Write the IQ grids' kernel headers from gguf-py's tables.")
    p.add_argument("--folder", type=Path, default=Path(str(files("muser_mlx.kernels"))), help="default: kernels/")
    for path in write_headers(p.parse_args().folder):
        print(path)


if __name__ == "__main__":
    main()
