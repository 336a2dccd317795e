import jax
import numpy as np
import pytest


jax.config.update("jax_enable_x64", True)


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)
