"""Metal source checked as Metal's compiler would check it, with clang++ on any host.

The source MLX generates for a kernel (kernel_harness.generated_metal_source) is compiled against
``metal_checked/metal_stdlib``: ``device``, ``constant`` and ``threadgroup`` are distinct clang
address spaces and ``thread`` the default, so a pointer passed into the wrong address space is a
compile error, as in Metal. No C++ standard library is on the include path (no ``std::``, no
``memcpy``), exceptions and RTTI are off, and the LLVM IR of the result is read for what Metal
also lacks: calls through function pointers and recursion. The target is AArch64 (Apple silicon's
CPU) with bfloat16, where clang has Metal's ``half`` and ``bfloat`` as native types; the check
compiles, it does not run (kernel_harness runs the same source against metal_on_cpu/).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from kernel_harness import KERNELS, built

CLANG = shutil.which("clang++")
SHIM = Path(__file__).parent / "metal_checked"
FLAGS = [
    "-std=c++17",
    "-target",
    "aarch64-linux-gnu",
    "-march=armv8.6-a+bf16",
    "-nostdinc",
    "-nostdinc++",
    "-fno-exceptions",
    "-fno-rtti",
    "-Wno-unknown-attributes",
    "-S",
    "-emit-llvm",
    "-O0",
]
NO_CLANG = "no clang++ on PATH (Debian: apt-get install clang; make test installs it as root)"

_DEFINE = re.compile(r"^define [^@]*@([\w.$]+)\(", re.M)
_CALLEE = re.compile(r"\bcall\b.*?[@%]([\w.$\"-]+)\(")


class MetalError(Exception):
    """The source is not Metal: clang's message, or what the IR shows."""


def compile_ir(source: str) -> str:
    """LLVM IR of ``source`` compiled as Metal (see the module's docstring); ``MetalError`` with
    clang's diagnostics where it does not compile. Kept per source in kernel_harness.BUILD."""

    def clang(cpp: Path, out: Path) -> None:
        done = subprocess.run(
            [CLANG, *FLAGS, f"-I{SHIM}", f"-I{KERNELS}", str(cpp), "-o", str(out)], capture_output=True, text=True
        )
        if done.returncode:
            raise MetalError(done.stderr)

    return built(source, [SHIM, KERNELS], "metal_{}.ll", clang).read_text()


def call_graph(ir: str) -> dict[str, set[str]]:
    """{function defined in ``ir``: the names it calls}; an indirect call is named ``%``."""
    graph, current = {}, None
    for line in ir.splitlines():
        if define := _DEFINE.match(line):
            current = graph.setdefault(define.group(1), set())
        elif line == "}":
            current = None
        elif current is not None and (call := _CALLEE.search(line)):
            callee = call.group(1)
            current.add("%" if re.search(r"\bcall\b[^@]*%" + re.escape(callee) + r"\(", line) else callee)
    return graph


def recursive(graph: dict[str, set[str]]) -> list[str]:
    """A cycle of calls among the defined functions (``[]`` if there is none)."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str]:
        for callee in sorted(graph.get(name, ())):
            if callee in path:
                return [*path[path.index(callee) :], callee]
            if callee in graph and callee not in done and (cycle := visit(callee, [*path, callee])):
                return cycle
        done.add(name)
        return []

    for name in graph:
        if name not in done and (cycle := visit(name, [name])):
            return cycle
    return []


def metal_check(source: str) -> None:
    """Raise ``MetalError`` unless ``source`` compiles as Metal and calls no function pointer
    and no function of its own recursively."""
    graph = call_graph(compile_ir(source))
    indirect = sorted(name for name, callees in graph.items() if "%" in callees)
    if indirect:
        raise MetalError(f"calls through a function pointer in {', '.join(indirect)}: Metal has none")
    if cycle := recursive(graph):
        raise MetalError(f"recursion: {' -> '.join(cycle)}: Metal has none")
