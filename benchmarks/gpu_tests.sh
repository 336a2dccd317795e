#!/usr/bin/env bash
# The default test suite on the accelerator: the same tests as `python -m pytest` (float64
# enabled by tests/conftest.py; float32 tests as written), with JAX's default backend the
# GPU, so that every `simulate`, `sweep` and gradient in them runs there. tests/test_distributed.py
# (Dask, SLURM arrays, jax.distributed: CPU processes) is left out. Wheels carried in .whl
# (MuJoCo, for the MJCF/URDF tests) are installed first when present. Writes as it goes
# (-v: every result named when it finishes, so a run stopped at LIMIT still names its failures).
# Arguments go to pytest after the script's own (`-m slow` for the slow tier, test ids).
#   OUT=folder [WORKERS=n] [LIMIT=seconds] bash benchmarks/gpu_tests.sh [pytest arguments]
set -u
OUT=${OUT:-benchmarks/out}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # several test processes share the one GPU
python3 -c "import jax, diffrax, equinox, numpy, scipy; print('jax', jax.__version__, \
'diffrax', diffrax.__version__, 'equinox', equinox.__version__, 'numpy', numpy.__version__, \
'scipy', scipy.__version__, jax.default_backend(), jax.devices())" 2>&1 | tee "$OUT/versions.txt"
nvidia-smi 2>&1 | head -12 | tee -a "$OUT/versions.txt"
timeout "${LIMIT:-420}" python3 -m pytest -p no:cacheprovider -n "${WORKERS:-12}" \
    --dist worksteal -v -rfE --durations=25 --ignore=tests/test_distributed.py \
    --junitxml="$OUT/junit.xml" "$@" 2>&1 | tee "$OUT/pytest.log"
echo "pytest exit: ${PIPESTATUS[0]}" | tee -a "$OUT/pytest.log"
