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
