"""Size limits (issue 10): no module over 400 lines, no function or method over 60.

Lengths are counted with ``ast``: a module's physical lines, a function's
``end_lineno - lineno + 1`` (its ``def`` line to its last line, decorators not
counted). Nested functions count on their own as well as inside their parent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dsv_platform"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_MODULE_DOCSTRING_LINES = 10  # the why in a few lines; the details go to docs/

# Offenders waiting for their split, OUTSIDE core/ only: a module as its path, a function as
# "path::Qualified.name". Remove an entry when its split lands (the stale-entry test says when).
PENDING_SPLIT: frozenset[str] = frozenset()


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function and method, nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _offenders() -> dict[str, str]:
    """Every module and function over its limit: id (as in PENDING_SPLIT) -> description."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found[rel] = f"{rel}: module has {lines} lines (limit {MAX_MODULE_LINES})"
        for name, length in _functions(ast.parse(text, filename=rel)):
            if length > MAX_FUNCTION_LINES:
                found[f"{rel}::{name}"] = f"{rel}:{name}: {length} lines (limit {MAX_FUNCTION_LINES})"
    return found


def test_modules_and_functions_stay_within_the_size_limits() -> None:
    over = {k: v for k, v in _offenders().items() if k not in PENDING_SPLIT}
    assert not over, "split these (one concern per module, helpers for long functions):\n" + "\n".join(sorted(over.values()))


def test_pending_split_has_no_stale_entries() -> None:
    stale = sorted(PENDING_SPLIT - set(_offenders()))
    assert not stale, f"now within the limits (or moved); remove from PENDING_SPLIT: {stale}"


def test_core_has_no_pending_split() -> None:
    assert not [k for k in PENDING_SPLIT if k.startswith("dsv_platform/core/")]


def test_module_docstrings_are_short() -> None:
    long_docs = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        if doc and len(doc.splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            long_docs.append(f"{rel}: module docstring has {len(doc.splitlines())} lines (limit {MAX_MODULE_DOCSTRING_LINES})")
    assert not long_docs, "shorten these (what and why in a few lines, then 'Details: docs/<page>.md'):\n" + "\n".join(long_docs)
