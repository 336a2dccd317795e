"""The examples in the docstrings run and print what they say."""

import doctest
import importlib
import pkgutil

import pytest

import ukjax


MODULES = sorted(
    m.name for m in pkgutil.walk_packages(ukjax.__path__, prefix="ukjax.")
    if not m.name.endswith("__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
