import os
import shutil
import tempfile


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


# A persistent compilation cache for each process of a test run: a program that a later
# test module compiles again, after `_release_compiled_programs` cleared JAX's in-memory
# caches, is read back instead of compiled (JAX caches no program with a host callback,
# e.g. equinox's run-time checks; those compile as before). One directory per process (a
# pytest-xdist worker's own, under one fresh temporary directory that the run's first
# process makes and removes at the end), so no entry is ever read while another process
# writes it. `UKJAX_TEST_XLA_CACHE=0`, or JAX's own `JAX_COMPILATION_CACHE_DIR`, turns it
# off. Figures: `benchmarks/RESULTS.md`, stop 78 section.
_CACHE_VARIABLE = "UKJAX_TEST_XLA_CACHE_DIR"
_made_cache: list[str] = []


def pytest_configure(config):
    if os.environ.get("UKJAX_TEST_XLA_CACHE", "1") == "0":
        return
    if jax.config.values.get("jax_compilation_cache_dir"):  # JAX_COMPILATION_CACHE_DIR too
        return
    base = os.environ.get(_CACHE_VARIABLE)
    if not base:
        base = tempfile.mkdtemp(prefix="ukjax-tests-xla-")
        os.environ[_CACHE_VARIABLE] = base
        _made_cache.append(base)
    path = os.path.join(base, os.environ.get("PYTEST_XDIST_WORKER", "main"))
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config):
    for path in _made_cache:
        shutil.rmtree(path, ignore_errors=True)


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
