"""The examples in the docstrings run and print what they say, and every public module,
function and strategy class has one."""

import doctest
import importlib
import inspect
import pkgutil

import pytest

import ukjax
import ukjax.systems


MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(ukjax.__path__, prefix="ukjax.")
    if not m.name.endswith("__main__")
)
# Modules with nothing public of their own to show (command line, plumbing).
NO_EXAMPLE = {
    "ukjax._cli",
    "ukjax._errors",
    "ukjax._probe",
    "ukjax._sweep_exec",
    "ukjax._sweep_share",
    "ukjax.systems",
}


# Docstring examples that take long (a whole fit, a whole sweep, derivatives of whole
# runs: each has its own tests in the default suite) run with the slow tests.
SLOW_MODULES = {
    "ukjax._fit",
    "ukjax._sweep",
    "ukjax._sweep_store",
    "ukjax._adjoint",
    "ukjax._friction",
    "ukjax._mjcf",
    "ukjax._servo",
}


@pytest.mark.parametrize(
    "name", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_MODULES else m for m in MODULES]
)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if name not in NO_EXAMPLE:
        assert result.attempted > 0, f"{name} has no docstring example"


def _public(module):
    for name in sorted(dir(module)):
        obj = getattr(module, name)
        if name.startswith("_") or inspect.ismodule(obj) or not callable(obj):
            continue
        yield f"{module.__name__}.{name}", obj


# Result containers and abstract bases are documented by the functions that return or
# accept them; everything else a user calls or instantiates shows how.
CONTAINERS = {
    "ConstraintResiduals",
    "EventLog",
    "Realisation",
    "ServoHistory",
    "Diagnostics",
    "FitResult",
    "Solution",
    "SweepResult",
    "SweepStatus",
    "IncompleteSweepError",
    "TrajectoryData",
    "UKTerms",
}


@pytest.mark.parametrize(
    "name, obj",
    list(_public(ukjax)) + list(_public(ukjax.systems)),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_every_public_function_and_class_has_an_example(name, obj):
    short = name.rsplit(".", 1)[1]
    if short in CONTAINERS or short.startswith("Abstract"):
        pytest.skip("container or abstract base")
    doc = inspect.getdoc(obj) or ""
    module_doc = inspect.getdoc(inspect.getmodule(obj)) or ""
    assert ">>>" in doc or (inspect.isclass(obj) and ">>>" in module_doc), (
        f"{name} has no runnable example in its docstring"
    )
