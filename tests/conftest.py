import os
import shutil
import subprocess
import tempfile


# XLA:CPU's faster-compiling settings for the repository's own tests: LLVM at optimisation
# level 1 and the older loop-fusion emitters, set before JAX starts its backend. Most tests
# wait on XLA's compile of a new program, which these settings shorten by about 30 % (the
# default suite 252 s against 357 s back to back, stop 79; `benchmarks/RESULTS.md`). The
# flags hold for the whole process and slow XLA's generated code (an 8-link chain's step
# about 1.7x), so they are used only where no test of someone else's can be in the run:
# `UKJAX_TEST_FAST_COMPILE=1` forces them, `=0` turns them off, and unset they are on only
# when every test file under tests/ is one the git checkout tracks (a test file added to
# this folder, or a copy of the tests outside a git checkout, runs at XLA's defaults, so
# that a timing taken there is a user's). CI runs a set of numerical tests at XLA's
# defaults too (`.ci/run`). Level 0 with the older emitters fails three rank-deficient UK
# checks (stop 67). A flag already in XLA_FLAGS wins. The library never sets XLA_FLAGS.
_FAST_COMPILE_FLAGS = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")


def _only_tracked_tests() -> bool:
    """Whether git tracks every test file (test_*.py, *_test.py, conftest.py) here."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        untracked = subprocess.run(
            ["git", "-C", here, "ls-files", "--others", "--", "."],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return False  # no git, or not a checkout: XLA's defaults
    name = os.path.basename
    is_test = lambda f: (
        f.endswith(".py")
        and (name(f).startswith("test_") or f.endswith("_test.py") or name(f) == "conftest.py")
    )
    return not any(is_test(f) for f in untracked)


def _fast_compile() -> bool:
    chosen = os.environ.get("UKJAX_TEST_FAST_COMPILE", "")
    return chosen != "0" if chosen else _only_tracked_tests()


FAST_COMPILE = _fast_compile()
# the run's first process decides; its pytest-xdist workers inherit the decision
os.environ["UKJAX_TEST_FAST_COMPILE"] = "1" if FAST_COMPILE else "0"
if FAST_COMPILE:
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


def pytest_report_header(config):
    flags = os.environ.get("XLA_FLAGS", "") or "(none)"
    mode = "faster-compiling settings" if FAST_COMPILE else "XLA's defaults"
    return f"ukjax tests: XLA:CPU at {mode}; XLA_FLAGS={flags}"


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
