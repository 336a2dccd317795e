import os


# Opt-in (`UKJAX_TEST_FAST_COMPILE=1`): run the tests with XLA:CPU's LLVM at optimisation
# level 1 and the older loop-fusion emitters, set before JAX starts its backend. Most tests
# wait on XLA's compile of a new program, which these settings shorten. Not the default:
# the flags hold for the whole process and slow XLA's generated code, which would distort
# any timing taken in a test process; level 0 with the older emitters fails three
# rank-deficient UK checks. Figures: `benchmarks/RESULTS.md`, stop 67 section.
# A flag already in XLA_FLAGS wins. The library itself never sets XLA_FLAGS.
_FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")
if os.environ.get("UKJAX_TEST_FAST_COMPILE", "") not in ("", "0"):
    _flags = os.environ.get("XLA_FLAGS", "")
    _extra = [f for f in _FAST_COMPILE_FLAGS if f.split("=")[0] not in _flags]
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
