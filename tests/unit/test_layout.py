"""The house rules that keep the floors readable: small modules, short functions (issue: one floor per job)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "projections", "config", "adapters", "streams", "memlog")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def _sources() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_source_module_is_over_600_lines() -> None:
    sizes = {path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines()) for path in _sources()}
    assert sizes, "no sources found"
    assert {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_is_over_100_lines() -> None:
    long = {}
    for path in _sources():
        for node in _functions(ast.parse(path.read_text())):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long[f"{path.relative_to(ROOT).as_posix()}:{node.name}"] = lines
    assert long == {}
