"""The package's structure: no import cycles inside ukjax/, no function-level imports of
ukjax modules (the usual way to hide a cycle), no string flags where a strategy is meant."""

import ast
import inspect
from pathlib import Path

import pytest

import ukjax


PACKAGE = Path(ukjax.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> list[str]:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    names = [target] + [f"{target}.{a.name}" for a in node.names]
    return [n for n in names if n.startswith("ukjax")]


def _graph():
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph, nested = {}, []
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        deps = set()
        for node in tree.body:
            if isinstance(node, ast.ImportFrom):
                deps.update(d for d in _resolve(name, node, is_package) if d in modules)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (
                        inner.level or "ukjax" in (inner.module or "")
                    ):
                        nested.append(f"{name}:{inner.lineno}")
        graph[name] = deps - {name}
    return graph, nested


def test_no_import_cycles():
    graph, _ = _graph()
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep) :] + [dep] if dep in stack else [node, dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state and node != "ukjax":
            visit(node, [node])


def test_no_function_level_imports_of_ukjax_modules():
    _, nested = _graph()
    assert not nested, f"function-level imports of ukjax modules: {nested}"


STRATEGY_ARGS = {"uk_solver", "stabilization", "initial_conditions"}


@pytest.mark.parametrize(
    "fn",
    [
        ukjax.simulate,
        ukjax.acceleration,
        ukjax.udwadia_kalaba,
        ukjax.constraint_forces,
        ukjax.sweep,
        ukjax.diagnostics,
    ],
)
def test_no_public_argument_defaults_to_a_string(fn):
    for name, p in inspect.signature(fn).parameters.items():
        assert not isinstance(p.default, str), f"{fn.__name__}({name}={p.default!r})"
        if name in STRATEGY_ARGS:
            assert p.default is None, f"{fn.__name__}({name}) default should be None"


def _sources():
    return {_module_name(p): p.read_text() for p in PACKAGE.rglob("*.py")}


def test_no_private_jax_imports_and_no_tracer_names():
    """No `jax._src` and no reading of JAX tracer class names: the program must not
    depend on how a call is transformed (or on a JAX release's internals)."""
    for name, text in _sources().items():
        for banned in ("jax._src", "JVPTracer", "BatchTracer", "JaxprTracer", "LinearizeTracer"):
            assert banned not in text, f"{name} mentions {banned}"


_MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Lock", "RLock"}


def _mutable(value) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        called = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
        return called in _MUTABLE_CALLS
    return False


def test_no_module_level_mutable_state():
    """No caches, registries or locks at module level (a cache lives in an object the
    user holds); no functools caches on module functions."""
    found = []
    for name, text in _sources().items():
        tree = ast.parse(text)
        for node in tree.body:
            value = getattr(node, "value", None)
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and _mutable(value):
                found.append(f"{name}:{node.lineno}")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for d in node.decorator_list:
                    target = d.func if isinstance(d, ast.Call) else d
                    if getattr(target, "attr", getattr(target, "id", "")) in {
                        "cache",
                        "lru_cache",
                    }:
                        found.append(f"{name}:{node.lineno} ({node.name})")
    assert not found, f"module-level mutable state: {found}"


def _concrete_strategies() -> set[str]:
    bases = (
        ukjax.AbstractContact,
        ukjax.AbstractFriction,
        ukjax.AbstractUKSolver,
        ukjax.AbstractStabilization,
        ukjax.AbstractInitialConditions,
        ukjax.AbstractKernels,
    )
    return {
        name
        for name in dir(ukjax)
        if inspect.isclass(obj := getattr(ukjax, name))
        and issubclass(obj, bases)
        and not inspect.isabstract(obj)
        and not name.startswith("Abstract")
    }


def test_no_isinstance_tests_on_concrete_strategies():
    """Strategies do the work through their methods: no code asks which concrete law,
    solver or policy it holds (only their abstract bases, to check arguments)."""
    concrete = _concrete_strategies()
    assert {"Impact", "Coulomb", "Regularized", "Projection"} <= concrete
    found = []
    for name, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
                classes = node.args[1]
                elts = classes.elts if isinstance(classes, ast.Tuple) else [classes]
                for c in elts:
                    cname = c.attr if isinstance(c, ast.Attribute) else getattr(c, "id", "")
                    if cname in concrete:
                        found.append(f"{name}:{node.lineno} isinstance(..., {cname})")
    assert not found, found


def test_event_kinds_are_named():
    """Events are recorded with ukjax.EventKind members, not bare integers."""
    assert ukjax.EVENT_KINDS == tuple(k.name.lower() for k in ukjax.EventKind)
    found = []
    for name, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "record"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
            ):
                found.append(f"{name}:{node.lineno}")
    assert not found, f"event kinds written as integers: {found}"
