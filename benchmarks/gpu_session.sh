#!/usr/bin/env bash
# The GPU figures of benchmarks/RESULTS.md's stop-42 section in one short run (the device machine's own JAX,
# diffrax and equinox; ukjax from this checkout). Every step has its own time limit and
# writes as it goes, so a step stopped at its limit keeps what it measured.
#   OUT=folder bash benchmarks/gpu_session.sh
set -u
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD:$PWD/benchmarks PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
$py -c "import jax, jaxlib, diffrax, equinox, optimistix, lineax, numpy, scipy; \
print('jax', jax.__version__, 'diffrax', diffrax.__version__, 'equinox', equinox.__version__, \
'optimistix', optimistix.__version__, 'numpy', numpy.__version__, 'scipy', scipy.__version__); \
print(jax.devices())" 2>&1 | tee "$OUT/versions.txt"
nvidia-smi 2>&1 | tee -a "$OUT/versions.txt"
timeout 130 $py benchmarks/core.py --batch 16384 --peer-trajectories 4 \
    --json "$OUT/core_gpu.json" 2>&1 | tee "$OUT/core_gpu.log"
timeout 160 $py benchmarks/sweep.py --systems rod,duffing --tolerances 1e-12 --batch 16384 \
    --peer 4 --rounds 1 --no-unrolled --json "$OUT/sweep_gpu.json" 2>&1 | tee "$OUT/sweep_gpu.log"
# the throughput table against batch size: benchmarks/gpu_throughput.sh
