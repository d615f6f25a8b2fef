"""Builds muser_mlx._cpu, the package's kernels on the CPU (csrc/, CMakeLists.txt), with MLX's
CMakeBuild against the mlx wheel in the build environment (pyproject.toml's [build-system] pins
the mlx the package runs with: the extension links its libmlx and must match its ABI).

The extension is optional: when its build fails (no C++ compiler, no CMake, a compile error) or
MUSER_MLX_CPU_EXTENSION=0 is set, the package installs without it, and at run time muser_mlx
warns once and runs MLX ops on the CPU (muser_mlx/backends/cpu.py). CMAKE_ARGS reaches CMake,
e.g. CMAKE_ARGS=-DMUSER_MLX_ARCH=native for kernels built for this machine's CPU alone.
"""

import os
import subprocess

from setuptools import setup
from setuptools.command.build_ext import build_ext

try:
    from mlx import extension
except ImportError:  # no mlx to build against: the package alone
    extension = None

EXTENSION = "muser_mlx._cpu"


def optional_build(base):
    """``base`` (MLX's CMakeBuild) whose failure to build warns instead of failing the install."""

    class OptionalCMakeBuild(base):
        def build_extension(self, ext) -> None:
            if os.environ.get("MUSER_MLX_CPU_EXTENSION") == "0":
                self.warn(f"{EXTENSION} not built (MUSER_MLX_CPU_EXTENSION=0): muser_mlx will run MLX ops on the CPU")
                return
            try:
                super().build_extension(ext)
            except (OSError, subprocess.CalledProcessError) as error:
                self.warn(f"{EXTENSION} failed to build ({error}): muser_mlx will run MLX ops on the CPU")

        # setuptools' run (not CMakeBuild's, which copies the whole package folder back in
        # place): an in-place build copies the one module, where it was built (ext.optional)
        run = build_ext.run

    return OptionalCMakeBuild


def cpu_extension():
    ext = extension.CMakeExtension(EXTENSION, sourcedir=os.path.dirname(os.path.abspath(__file__)))
    ext.optional = True
    return ext


if __name__ == "__main__":
    if extension is None:
        setup()
    else:
        setup(ext_modules=[cpu_extension()], cmdclass={"build_ext": optional_build(extension.CMakeBuild)})
