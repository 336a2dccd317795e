import jax
import numpy as np
import pytest


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
