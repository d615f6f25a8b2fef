#!/usr/bin/env bash
# Nsight Compute over one launch of each LM head kernel named below (the fourth matching launch,
# after the warm-up calls of benchmarks/heads_by_format.py), its full set of sections; writes
# ncu_<case>_gpu.txt into DIR (default benchmarks/results). Needs ncu (CUDA's Nsight Compute)
# on a machine whose runtime lets it read the counters; the clocks are left alone.
#   bash benchmarks/profile_heads.sh [DIR [CASE...]]     # every case, or those named
set -u
DIR="${1:-benchmarks/results}"
shift $(($# > 0 ? 1 : 0))
mkdir -p "$DIR"
ncu --version | tail -1
cases=(  # case|kernel name regex|heads_by_format.py arguments
  "bytedot_TQ1_0|bytedot|--formats TQ1_0"
  "bytedot_TQ2_0|bytedot|--formats TQ2_0"
  "bytedot_Q4_K|bytedot|--formats Q4_K"
  "bytedot_Q3_K|bytedot|--formats Q3_K"
  "bytedot_IQ2_XXS|bytedot|--formats IQ2_XXS"
  "bytedot_IQ2_XS|bytedot|--formats IQ2_XS"
  "bytedot_IQ2_S|bytedot|--formats IQ2_S"
  "bytedot_IQ3_XXS|bytedot|--formats IQ3_XXS"
  "bytedot_IQ3_S|bytedot|--formats IQ3_S"
  "bytedot_IQ1_M|bytedot|--formats IQ1_M"
  "mma_Q8_0_gemma16|mma|--formats Q8_0 --rows 16 --dims 640 --vocab 262144"
  "tile_mma_Q4_K_64|tile_mma|--formats Q4_K --rows 64"
)
for c in "${cases[@]}"; do
  IFS='|' read -r name kernel args <<< "$c"
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  # shellcheck disable=SC2086  # args are words
  timeout 120 ncu --clock-control none -k "regex:$kernel" --launch-skip 3 --launch-count 1 --set full \
    python3 benchmarks/heads_by_format.py $args --reps 1 --stem "/tmp/profile_$name" > "$DIR/ncu_${name}_gpu.txt" 2>&1
  echo "== $name rc=$?"
  grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|DRAM Throughput|Warp Cycles Per Issued" \
    "$DIR/ncu_${name}_gpu.txt"
done
