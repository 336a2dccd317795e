import os


# The test run's XLA:CPU settings, set before JAX starts its backend: LLVM at optimisation
# level 1 and the older loop-fusion emitters (those of simulate's own single-trajectory
# program, `ukjax.compiler_options(batched=False)`). Most tests wait on XLA's compile of a
# new program, not on running it: on the 2-core box at stop 67 the default suite took
# 5 min 23 s with these settings against 7 min 17 s with XLA's defaults the same day (all
# passing both ways). Level 0 with the older emitters was faster again (3 min 48 s), but
# there the unrolled UK solve at rank-deficient rows came out 5e-7 from the reference where
# XLA's defaults give 2e-13 and LAPACK's kernels 8e-16 (three tests fail): not used.
# A setting already in XLA_FLAGS wins; `UKJAX_TEST_XLA_DEFAULTS=1` keeps XLA's defaults.
# The library itself never sets XLA_FLAGS.
_TEST_XLA_FLAGS = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")
if os.environ.get("UKJAX_TEST_XLA_DEFAULTS", "") in ("", "0"):
    _flags = os.environ.get("XLA_FLAGS", "")
    _extra = [f for f in _TEST_XLA_FLAGS if f.split("=")[0] not in _flags]
    os.environ["XLA_FLAGS"] = " ".join([_flags, *_extra]).strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402


jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop a test module's compiled programs when it ends (programs shared by its tests
    stay compiled while it runs). A worker that runs much of the slow suite otherwise
    keeps every module's executables: at stop 58 one grew past 7 GB and crashed."""
    yield
    jax.clear_caches()
