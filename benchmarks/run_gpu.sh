#!/usr/bin/env bash
# The GPU record: the whole test suite with MLX's GPU backend, then the benchmarks.
# Run from the repository root with mlx (CUDA or Metal build), gguf, numpy, pytest, hypothesis
# importable and mlx's mlx.launch on PATH (the distributed tests launch members with it; pip
# --target puts it in <target>/bin); MUSER_MLX_CPU_EXTENSION=0 where muser_mlx runs from the
# source tree without its CPU extension built. OUT (default benchmarks/results) receives the
# logs and results.
set -uo pipefail
OUT="${OUT:-benchmarks/results}"
mkdir -p "$OUT"
python3 -c "import mlx.core as mx; print('mlx', mx.__version__, mx.default_device(), mx.device_info().get('device_name'))"
python3 -m pytest -q -p no:cacheprovider tests 2>&1 | tee "$OUT/gpu_tests.log"
cd benchmarks
python3 gather.py --formats Q4_K Q5_K Q6_K Q8_0 Q4_0 F16 BF16 F32 2>&1 | tee "$OUT/gather_gpu.log"
python3 eval_cost.py 2>&1 | tee "$OUT/eval_cost_gpu.log"
python3 as_linear.py 2>&1 | tee "$OUT/as_linear_gpu.log"
python3 matvec_tuning.py --kernel bytedot --rows 1 2>&1 | tee "$OUT/bytedot_tuning_gpu.log"
python3 mma_tuning.py 2>&1 | tee "$OUT/mma_tuning_gpu.log"
cp results/*gpu* "$OUT"/ 2>/dev/null || true
cd ..
# GGUF models in mlx-lm (benchmarks/decode.py): decode and prefill against mlx-lm bfloat16 and 4-bit
python3 benchmarks/decode.py --model gemma-random 2>&1 | tee "$OUT/decode_gemma_random_gpu.log"
python3 benchmarks/decode.py --model gemma 2>&1 | tee "$OUT/decode_gemma_gpu.log"
python3 benchmarks/decode.py --model glimmer-2 --prefill 0 --tokens 32 2>&1 | tee "$OUT/decode_glimmer_2_gpu.log"
cp benchmarks/results/decode_*_gpu* "$OUT"/ 2>/dev/null || true
