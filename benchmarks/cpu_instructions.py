"""Instructions per value of the CPU extension's kernels, counted by valgrind's callgrind (a count,
not a time: it holds on a loaded machine). A driver runs the gather (64 ids) and the one-row heads
of a random 256 x 4,096 table through kernels/ as csrc/format_kernels.h does (one-lane warps,
lanes_cpu_serial.h), compiled as CMakeLists.txt compiles the kernel units: the head from the
dequantized values (kernels/matvec.h) and, for a quantized format on an AVX2 target, the byte dot
products (kernels/bytedot_cpu.h, float32 x's run records made first, counted with them).

    python benchmarks/cpu_instructions.py                       # Q8_0 Q4_K Q6_K
    python benchmarks/cpu_instructions.py --formats Q4_K --values 32 --vrows 8
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
IDS, VOCAB, DIMS = 64, 256, 4096
DRIVER = """
#include "prelude_cpu.h"
#include "lanes_cpu_serial.h"
#include "format_{file}.h"
#include "gather.h"
#include "bytedot_cpu.h"
#include <cstdlib>
#include <vector>
typedef muser::Format<muser::ggml::{qtype}> F;
__attribute__((noinline)) void gather(const uint8_t* t, const int64_t* ids, float* out) {{
  for (uint32_t r = 0; r < {ids}; ++r)
    for (uint32_t g = 0; g < {dims} / 16; ++g)
      muser::gather_rows<F, 16>(t, ids + r, 1u, out + uint64_t(r) * {dims}, {dims}u, {vocab}u, g, 0u, 1u);
}}
__attribute__((noinline)) void head(const uint8_t* t, const float* x, float* out) {{
  const uint32_t warps = ({vocab} + {vrows} - 1) / {vrows};
  for (uint32_t w = 0; w < warps; ++w) muser::matvec_rows<F, {values}, 1, {vrows}>(t, x, 1u, out, {dims}u, {vocab}u, w, warps);
}}
template <typename G>  // a template, so that a float format's discarded branch is not instantiated
__attribute__((noinline)) void bytedot(const uint8_t* t, const float* x, uint32_t* runs, float* out) {{
#ifdef MUSER_CPU_BYTE_DOTS
  if constexpr (requires {{ G::level_bits; }}) {{
    for (uint32_t r = 0; r < {dims} / 16; ++r) muser::x_runs<3>(x, {dims}u / 16, runs, r);
    const uint32_t warps = ({vocab} + {vrows} - 1) / {vrows};
    for (uint32_t w = 0; w < warps; ++w)
      muser::stream_logits<G, 1, {vrows}, muser::CpuByteLanes<G, 1, {vrows}, 3>, const uint8_t*>(
          t, static_cast<const uint32_t*>(runs), 1u, out, {dims}u, {vocab}u, w, warps);
  }}
#endif
}}
int main() {{
  std::vector<uint8_t> t(uint64_t({vocab}) * ({dims} / F::block_values) * F::block_bytes);
  for (auto& b : t) b = uint8_t(std::rand());
  std::vector<int64_t> ids({ids});
  for (auto& i : ids) i = std::rand() % {vocab};
  std::vector<float> out({ids} * {dims}), x({dims}), logits({vocab}), byte_logits({vocab});
  for (auto& v : x) v = float(std::rand()) / RAND_MAX - 0.5f;
  std::vector<uint32_t> runs({dims} / 16 * muser::XRunRecord<3>::words);
  gather(t.data(), ids.data(), out.data());
  head(t.data(), x.data(), logits.data());
  bytedot<F>(t.data(), x.data(), runs.data(), byte_logits.data());
  volatile float sink = out[1] + logits[1] + byte_logits[1];  // keeps both results live; the exit status stays 0
  (void)sink;
  return 0;
}}
"""


def count(qtype: str, values: int, vrows: int, flags: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        src, exe, out = Path(d) / "driver.cpp", Path(d) / "driver", Path(d) / "callgrind.out"
        src.write_text(
            DRIVER.format(file=qtype.lower(), qtype=qtype, ids=IDS, dims=DIMS, vocab=VOCAB, values=values, vrows=vrows)
        )
        subprocess.run(["g++", "-std=c++20", *flags, f"-I{KERNELS}", str(src), "-o", str(exe)], check=True)
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(exe)], check=True, capture_output=True
        )
        report = subprocess.run(
            ["callgrind_annotate", "--threshold=100", str(out)], check=True, capture_output=True, text=True
        ).stdout
    counts = {}
    for name, values_done in (("gather", IDS * DIMS), ("head", VOCAB * DIMS), ("bytedot", VOCAB * DIMS)):
        match = re.search(rf"^\s*([\d,]+) .*\b{name}[(<]", report, re.M)
        counts[name] = int(match.group(1).replace(",", "")) / values_done if match else None
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", nargs="+", default=["Q8_0", "Q4_K", "Q6_K"])
    parser.add_argument("--values", type=int, default=16, help="head values per lane and step (VALUES)")
    parser.add_argument("--vrows", type=int, default=4, help="head table rows per warp (VROWS)")
    parser.add_argument("--arch", default="x86-64-v3", help="-march= of the kernel units")
    args = parser.parse_args()
    if not (shutil.which("valgrind") and shutil.which("g++")):
        raise SystemExit("needs valgrind and g++ (Debian: apt-get install valgrind g++)")
    flags = ["-O3", f"-march={args.arch}"]
    print(f"instructions per value, {' '.join(flags)}, VALUES {args.values}, VROWS {args.vrows}")
    for qtype in args.formats:
        c = count(qtype, args.values, args.vrows, flags)
        byte = "" if c["bytedot"] is None else f"   byte dots {c['bytedot']:5.2f}"
        print(f"{qtype:6} gather {c['gather']:5.2f}   head {c['head']:5.2f}{byte}")


if __name__ == "__main__":
    main()
