"""The package's layers import downward only (docs/architecture.md): the math knows no storage,
broker or process; storage and brokers know neither each other nor the featurizer; metrics are
pure; and no module imports itself round a circle. Every import counts, lazy ones included."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "noveld"

#: layer -> the layers it may import (besides itself); a layer is a subpackage or a top module
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "eval": set(),
    "schema": set(),
    "featurize": {"models", "schema"},
    "synth": {"schema"},
    "state": {"models", "schema"},
    "connectors": {"schema"},
    "daemon": {"models", "state", "connectors", "schema", "featurize", "eval", "synth"},
    "launch": {"daemon"},
    "__main__": {"launch"},
    "__init__": set(),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


ROOT = "__init__"
"""The package root (its version) may be imported from anywhere."""


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> set[str]:
    """Every noveld module this file imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("noveld"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("noveld"):
            module = str(node.module)
            for a in node.names:
                sub = f"{module}.{a.name}"
                found.add(sub if _is_module(sub) else module)
    return found


def _is_module(dotted: str) -> bool:
    base = PACKAGE.parent.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


@functools.cache
def _graph() -> dict[str, set[str]]:
    return {_module_name(p): _imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_every_module_has_a_layer() -> None:
    unknown = {m for m in _graph() if _layer(m) not in ALLOWED}
    assert not unknown, f"modules outside every layer (add them to ALLOWED): {sorted(unknown)}"


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    broken = [
        f"{mod} imports {dep}"
        for mod, deps in _graph().items()
        if _layer(mod) == layer
        for dep in sorted(deps)
        if _layer(dep) not in {layer, ROOT, *ALLOWED[layer]}
    ]
    assert not broken, "\n".join(broken)


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle a depth-first walk meets, each as the path that closes it."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    circles: list[list[str]] = []

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(graph.get(mod, ())):
            if dep not in graph:
                continue
            if state.get(dep) == 1:
                circles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    return circles


def test_no_import_circles() -> None:
    circles = _circles(_graph())
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c", "a"]]


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rule is not vacuous: a models file importing the state layer is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from noveld.state.base import StateStore\n", encoding="utf-8")
    deps = _imports(bad)
    assert "noveld.state.base" in deps
    assert _layer("noveld.state.base") not in ALLOWED["models"]
