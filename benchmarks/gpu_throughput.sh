#!/usr/bin/env bash
# The accelerator throughput table of benchmarks/RESULTS.md (issue 44 item 6) in one run:
# benchmarks/gpu.py at its defaults (chain N = 8, 16 and the URDF arm; batch 1K-64K on the
# accelerator, 1K on the CPU beside it; float64 and float32), under a time limit, writing its
# JSON after every point so that a run stopped at the limit keeps what it measured.
#   OUT=folder [LIMIT=seconds] bash benchmarks/gpu_throughput.sh
set -u
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/benchmarks${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py -c "import jax, diffrax, equinox, mujoco, numpy; print('jax', jax.__version__, \
'diffrax', diffrax.__version__, 'equinox', equinox.__version__, 'mujoco', mujoco.__version__, \
'numpy', numpy.__version__, jax.devices())" 2>&1 | tee "$OUT/versions.txt"
timeout "${LIMIT:-450}" $py benchmarks/gpu.py --json "$OUT/gpu.json" 2>&1 | tee "$OUT/gpu.log"
