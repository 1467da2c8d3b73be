"""The failure table (core/publication/failures.py) is the only copy of the exit codes (issue 28, item 2).

The README's and docs/reliability.md's exit-code tables equal it row for row; no two kinds share a code
unless both rows say so; every kind has a row; error classes and ``dsv`` commands take their codes from
it (no literal exit code anywhere else); cli/main.py uses it and keeps no third copy.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

import dsv_platform
from dsv_platform.core import errors
from dsv_platform.core.errors import DsvError, FailureKind, ResolutionError
from dsv_platform.core.publication.failures import BY_KIND, FAILURES, HEADER, Failure, exit_code, markdown_table, summary
from dsv_platform.core.reproduction.reproduction import Outcome, outcome_of_failure

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "dsv_platform"
DOCS = ("README.md", "docs/reliability.md")
TABLE_MODULE = PACKAGE / "core" / "publication" / "failures.py"


def _cells(line: str) -> tuple[str, ...]:
    return tuple(cell.strip() for cell in line.strip().strip("|").split("|"))


def doc_table(path: Path) -> list[tuple[str, ...]]:
    """The rows of the one markdown table in ``path`` whose header is the failure table's."""
    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("|") and _cells(line) == HEADER]
    assert len(starts) == 1, f"{path}: {len(starts)} tables headed {HEADER}"
    rows = []
    for line in lines[starts[0] + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(_cells(line))
    return rows


def table_rows() -> list[tuple[str, ...]]:
    return [(f.kind.name, str(f.exit_code), f.audit or "-", f.meaning) for f in FAILURES]


@pytest.mark.parametrize("doc", DOCS)
def test_the_documented_exit_code_tables_equal_the_failure_table(doc: str) -> None:
    assert doc_table(ROOT / doc) == table_rows(), f"{doc}: paste dsv_platform.core.publication.failures.markdown_table()"


def test_markdown_table_round_trips() -> None:
    lines = markdown_table()
    assert _cells(lines[0]) == HEADER and [_cells(line) for line in lines[2:]] == table_rows()
    assert not [f.kind.name for f in FAILURES if "|" in f.meaning or "\n" in f.meaning]


def test_every_kind_has_exactly_one_row() -> None:
    kinds = [f.kind for f in FAILURES]
    assert sorted(kinds, key=lambda k: k.name) == sorted(FailureKind, key=lambda k: k.name)
    assert len(kinds) == len(set(kinds))
    assert [f.exit_code for f in FAILURES] == sorted(f.exit_code for f in FAILURES)  # printed in code order


def share_problems(table: Sequence[Failure]) -> list[str]:
    """Codes used by several kinds whose rows do not all name each other in ``shares_with`` (and codes out of range)."""
    by_code: dict[int, set[FailureKind]] = {}
    for f in table:
        by_code.setdefault(f.exit_code, set()).add(f.kind)
    problems = [f"{f.kind.name}: exit {f.exit_code} is not 1-125" for f in table if not 0 < f.exit_code < 126]  # 0: success; 126+: the shell's
    for f in table:
        others = by_code[f.exit_code] - {f.kind}
        if set(f.shares_with) != others:
            problems.append(f"{f.kind.name}: exit {f.exit_code} shared with {sorted(k.name for k in others)}, declared {sorted(k.name for k in f.shares_with)}")
    return problems


def test_no_two_kinds_share_a_code_unless_both_rows_say_so() -> None:
    assert share_problems(FAILURES) == []


def test_the_share_check_catches_an_undeclared_share() -> None:
    a, b = Failure(FailureKind.BREAKING, 9, "x"), Failure(FailureKind.ENVIRONMENT, 9, "y")
    assert len(share_problems([a, b])) == 2
    declared = [replace(a, shares_with=(b.kind,)), replace(b, shares_with=(a.kind,))]
    assert share_problems(declared) == []
    assert len(share_problems([declared[0], b])) == 1  # one side only is not enough


def test_resolution_kinds_have_an_audit_outcome_and_others_none() -> None:
    resolution = {cls.kind for cls in _subclasses(ResolutionError)}
    assert resolution == {f.kind for f in FAILURES if f.resolution}
    assert FailureKind.QUARANTINED in resolution
    for f in FAILURES:
        if f.resolution:
            assert outcome_of_failure(f.kind) is Outcome(f.audit)


def test_error_classes_take_their_codes_from_the_table() -> None:
    _import_everything()
    for cls in _subclasses(DsvError):
        assert cls.kind in BY_KIND, cls
        assert "exit_code" not in vars(cls) or cls is DsvError, f"{cls.__name__} sets its own exit_code"
    for kind in FailureKind:
        assert kind.exit_code == exit_code(kind) == BY_KIND[kind].exit_code
    quarantined = errors.QuarantinedError("x is quarantined", ref="x")
    assert quarantined.kind is FailureKind.QUARANTINED and quarantined.exit_code == exit_code(FailureKind.QUARANTINED)
    assert not isinstance(quarantined, errors.AccessDeniedError) and str(quarantined).startswith("QUARANTINED: ")
    assert errors.EnvironmentSetupError("x").exit_code == exit_code(FailureKind.ENVIRONMENT)
    assert DsvError("x").exit_code == exit_code(FailureKind.INVALID)


def literal_codes(text: str, where: str, *, cli: bool) -> list[str]:
    """``exit_code = 9``, ``FOO_EXIT = 9`` and, in cli/ (``cli``), ``return 9`` / ``return 0 if ok else 9``: codes chosen outside the table."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Constant) and type(node.value.value) is int:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else "" for t in targets]
            found += [f"{where}:{node.lineno} {n}" for n in names if n == "exit_code" or n.endswith("_EXIT")]
        if cli and isinstance(node, ast.Return) and node.value is not None:
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            found += [f"{where}:{node.lineno} return {v.value}" for v in values if isinstance(v, ast.Constant) and type(v.value) is int and v.value != 0]
    return found


def test_no_exit_code_is_written_outside_the_table() -> None:
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != TABLE_MODULE
        for hit in literal_codes(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)), cli=path.is_relative_to(PACKAGE / "cli"))
    ]
    assert offenders == []


def test_the_literal_code_scan_finds_each_form() -> None:
    text = "class E:\n    exit_code = 9\nRULE_EXIT = 9\ndef f(ok):\n    if ok:\n        return 0\n    return 0 if ok else 9\n"
    assert sorted(hit.split(" ", 1)[1] for hit in literal_codes(text, "probe.py", cli=True)) == ["RULE_EXIT", "exit_code", "return 9"]
    assert sorted(hit.split(" ", 1)[1] for hit in literal_codes(text, "probe.py", cli=False)) == ["RULE_EXIT", "exit_code"]


def test_cli_main_uses_the_table_and_keeps_no_copy() -> None:
    from dsv_platform.cli.main import build_parser

    path = PACKAGE / "cli" / "main.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert "dsv_platform.core.publication" in imported or "dsv_platform.core.publication.failures" in imported
    in_slices = {id(c) for s in ast.walk(tree) if isinstance(s, ast.Subscript) for c in ast.walk(s.slice)}
    numbers = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int and n.value > 1 and id(n) not in in_slices]
    assert numbers == []  # no exit code literal (only 0, 1 and slice bounds such as argv[1:] and message[:500])
    docstring = ast.get_docstring(tree) or ""
    assert not re.search(r"\b(?:[2-9]|1\d|70)\b", docstring), "cli/main.py's docstring lists exit codes: the table is the one copy"
    assert summary() in " ".join((build_parser().epilog or "").split())


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _import_everything() -> None:
    """Every module of the package, so that every DsvError subclass exists."""
    for info in pkgutil.walk_packages(dsv_platform.__path__, "dsv_platform."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
