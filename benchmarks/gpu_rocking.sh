#!/usr/bin/env bash
# GPU figures of the rocking-block batch (issue 42): ukjax only, two batch sizes, each step
# with its own time limit, writing as it goes.   OUT=folder bash benchmarks/gpu_rocking.sh
set -u
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$OUT/versions.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee -a "$OUT/versions.txt"
timeout 200 $py benchmarks/rocking.py --no-mujoco --batch 4096 \
    --json "$OUT/rocking_gpu_4096.json" 2>&1 | tee "$OUT/rocking_gpu_4096.log"
timeout 150 $py benchmarks/rocking.py --no-mujoco --batch 65536 \
    --json "$OUT/rocking_gpu_65536.json" 2>&1 | tee "$OUT/rocking_gpu_65536.log"
