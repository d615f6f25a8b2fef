"""Write the IQ grids' kernel headers, kernels/<grid>.h, from gguf-py's tables (grids.py).

python -m muser_mlx.formats.write_grids [--folder kernels/]
"""

from __future__ import annotations

import argparse
from importlib.resources import files
from pathlib import Path

from .grids import GRIDS


def write_headers(folder: Path) -> list[Path]:
    paths = []
    for grid in GRIDS.values():
        path = folder / grid.kernel_file
        path.write_text(grid.header())
        paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description="Write the IQ grids' kernel headers from gguf-py's tables.")
    p.add_argument("--folder", type=Path, default=Path(str(files("muser_mlx.kernels"))), help="default: kernels/")
    for path in write_headers(p.parse_args().folder):
        print(path)


if __name__ == "__main__":
    main()
