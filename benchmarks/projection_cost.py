"""The cost of one projection in a decode step: a chain of one-row projections evaluated at once,
as a decode step evaluates its layers, at Gemma 3 270M's MLP shape (640 -> 2,048 of Q5_0, then
2,048 -> 640 of Q6_K, its Q4_K_M file's types), x ``[1, 1, 640]`` bfloat16 as mlx-lm passes it.

Contenders, the same weights: ``muser_mlx.Linear``; the same with every call built each time
(``tuning.COMPILED_ROWS`` 0); the matvec kernel alone, its launch built once and x ``[1, dims]``
(``head.matvec``'s kernel call: the floor of a custom kernel); ``nn.Linear`` in bfloat16;
``nn.QuantizedLinear`` 4-bit (group 64, what ``nn.quantize`` makes). Per projection: the time of
the chain, built and evaluated (common.alternating_medians), and the host's part, building it.

    python benchmarks/projection_cost.py
    python benchmarks/projection_cost.py --links 128 --reps 400

``--kernels`` adds a kernel alone per spec, ``KERNEL[:NAME=VALUE;...]`` (values Python literals).
The layout sweep of docs/performance.md ("Matvec layout"), in projection_cost_kernels_gpu.md:

    python benchmarks/projection_cost.py --reps 100 --stem projection_cost_kernels --kernels \
        "matvec:MATVEC_VROWS={1: 1}" "matvec:MATVEC_VROWS={1: 2};MATVEC_MIN_WARPS=0" \
        "matvec:MATVEC_VROWS={1: 4};MATVEC_MIN_WARPS=0" "matvec:MATVEC_VROWS={1: 8};MATVEC_MIN_WARPS=0" bytedot \
        "bytedot:BYTEDOT_VROWS=2;BYTEDOT_VROWS_BY_FORMAT={}" "bytedot:BYTEDOT_VROWS=1;BYTEDOT_VROWS_BY_FORMAT={}" \
        "bytedot:BYTEDOT_RUNS=1"

Prints a table and writes benchmarks/results/<stem>_<cpu|gpu>.{md,json} (stem: projection_cost).
"""

from __future__ import annotations

import argparse
import statistics
import time

import mlx.core as mx
from mlx import nn

from muser_mlx import Linear, Table, backends
from muser_mlx.backends import head, tuning

from common import alternating_medians, markdown, random_q_bytes, save, tuning_constants

SHAPES = ((640, 2048, "Q5_0"), (2048, 640, "Q6_K"))  # (input, output, type): gate_proj, down_proj


def chain(layers, links: int):
    """``x -> layers[1](layers[0](x)) ...``, ``links`` projections in all."""

    def run(x):
        for i in range(links):
            x = layers[i % len(layers)](x)
        return x

    return run


def kernel_alone(layer: Linear, backend: str, kernel: str = "matvec", constants: dict | None = None):
    """``x [1, dims] -> [1, output_dims]`` by the streamed ``kernel`` (``"matvec"``, or
    ``"bytedot"``: x's run records, then the byte dot products), its launches built once under
    the tuning ``constants`` and the table's words prepared once."""
    device = backends.BACKENDS[backend]
    table = layer.table
    x = mx.zeros((1, table.dims), mx.bfloat16)
    words = device.kernel_words(table.data)
    with tuning.fixed(**(constants or {})):
        if kernel == "matvec":
            launch = head.matvec_launch(table, x)
            return lambda x: device.matvec_kernel(launch, [words, x])
        runs, launch = head.xruns_launch(table, x), head.bytedot_launch(table, x)
    return lambda x: device.bytedot_kernel(launch, [words, device.xruns_kernel(runs, [x])])


def host_seconds(fn, x, reps: int) -> float:
    """Median time to build ``fn(x)`` (then evaluated, untimed)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = fn(x)
        times.append(time.perf_counter() - t0)
        mx.eval(y)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--links", type=int, default=64, help="projections per chain")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument(
        "--kernels",
        nargs="*",
        default=[],
        metavar="KERNEL[:NAME=VALUE,...]",
        help="more kernels alone under tuning constants (Python literals), e.g. matvec:MATVEC_VROWS={1:1}",
    )
    ap.add_argument("--stem", default="projection_cost", help="result file name, before _gpu / _cpu")
    args = ap.parse_args()
    backend = backends.select("auto")
    ours = [
        Linear.from_table(Table.from_bytes(random_q_bytes(q, n_out, n_in, seed=i), q, n_in))
        for i, (n_in, n_out, q) in enumerate(SHAPES)
    ]
    floats = []
    for layer in ours:
        dense = nn.Linear(layer.input_dims, layer.output_dims, bias=False)
        dense.weight = backends.bind(layer.table, mx.bfloat16, backends.select("auto", layer.table))(
            mx.arange(layer.output_dims)
        )
        floats.append(dense)
    quantized = [nn.QuantizedLinear.from_linear(d, group_size=64, bits=4) for d in floats]
    mx.eval([m.parameters() for m in ours + floats + quantized])
    x3 = (mx.random.normal((1, 1, SHAPES[0][0])) * 0.1).astype(mx.bfloat16)
    contenders = {
        "muser_mlx.Linear": (chain(ours, args.links), x3, {}),
        "muser_mlx.Linear, calls built (COMPILED_ROWS 0)": (chain(ours, args.links), x3, {"COMPILED_ROWS": 0}),
        "nn.Linear bfloat16": (chain(floats, args.links), x3, {}),
        "nn.QuantizedLinear 4-bit, group 64": (chain(quantized, args.links), x3, {}),
    }
    if backend in backends.KERNEL_BACKENDS:
        alone = [kernel_alone(layer, backend) for layer in ours]
        contenders["matvec kernel alone (launch built once)"] = (chain(alone, args.links), x3.reshape(1, -1), {})
        for spec in args.kernels:
            kernel, _, settings = spec.partition(":")
            constants = tuning_constants(settings)
            alone = [kernel_alone(layer, backend, kernel, constants) for layer in ours]
            contenders[f"{kernel} kernel alone, {settings or 'as tuned'}"] = (
                chain(alone, args.links),
                x3.reshape(1, -1),
                {},
            )

    def timed(fn, constants):
        def call(x):
            with tuning.fixed(**constants):
                return fn(x)

        return call

    calls = {name: ((lambda i, x=x: (x,)), timed(fn, c)) for name, (fn, x, c) in contenders.items()}
    chains = alternating_medians(calls, args.reps)
    rows, data = [], {"links": args.links, "shapes": SHAPES, "backend": backend, "results": {}}
    base = chains["muser_mlx.Linear"]
    for name, (fn, x, constants) in contenders.items():
        host = host_seconds(timed(fn, constants), x, max(20, args.reps // 10)) / args.links
        per = chains[name] / args.links
        rows.append([name, f"{1e6 * per:.1f}", f"{per * args.links / base:.2f}", f"{1e6 * host:.1f}"])
        data["results"][name] = {"seconds_per_projection": per, "host_seconds_per_projection": host}
    table = markdown(["contender", "us per projection", "vs muser_mlx", "host us per projection"], rows)
    print(table)
    title = f"One projection of a decode step: chains of {args.links}, Gemma 3 270M's MLP shapes"
    note = (
        f"\n\n{args.links} one-row projections (640 -> 2,048 Q5_0, 2,048 -> 640 Q6_K, alternating) "
        "per evaluation, bfloat16 x; median of the chain's time, built and evaluated, per projection."
    )
    print(f"saved {save(args.stem, title, table + note, data)}")


if __name__ == "__main__":
    main()
