"""Issue 15 part 3: `dsv` starts fast. The static command index matches what the command modules
register, `dsv --help` imports no command module, and `dsv --help` / `dsv resolve` import none of
dagster, pyiceberg, pyarrow, pandas, pandera (checked in a fresh interpreter)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import dsv_platform.cli
from dsv_platform.cli.main import COMMAND_MODULES, COMMANDS, build_parser

HEAVY = ("dagster", "pyiceberg", "pyarrow", "pandas", "pandera")

# Runs main(argv) in a fresh interpreter and prints the exit code and the loaded top-level packages.
PROBE = """
import contextlib, io, json, sys
from dsv_platform.cli.main import main
out, err = io.StringIO(), io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "err": err.getvalue(), "modules": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def registered(module: str) -> list[tuple[str, str | None]]:
    """(command, help) in the order ``module.register`` adds them."""
    sub = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(module).register(sub)
    return [(action.dest, action.help) for action in sub._choices_actions]


def test_every_command_module_is_listed() -> None:
    present = {f"dsv_platform.cli.{m.name}" for m in pkgutil.iter_modules(dsv_platform.cli.__path__) if m.name.endswith("_cmd")}
    missing = sorted(present - set(COMMAND_MODULES))
    assert not missing, f"add {missing} to COMMAND_MODULES and its commands to COMMANDS in dsv_platform/cli/main.py"
    indexed = {module for module, _ in COMMANDS.values()}
    assert indexed == set(COMMAND_MODULES), f"COMMANDS (dsv_platform/cli/main.py) lacks the commands of {sorted(set(COMMAND_MODULES) - indexed)}"


def test_index_equals_what_the_modules_register() -> None:
    actual = [(name, module, help_text) for module in COMMAND_MODULES for name, help_text in registered(module)]
    index = [(name, module, help_text) for name, (module, help_text) in COMMANDS.items()]
    for name, module, help_text in actual:
        assert name in COMMANDS, f"{module} registers {name!r}: add {name!r}: ({module!r}, {help_text!r}) to COMMANDS in dsv_platform/cli/main.py"
        assert COMMANDS[name] == (module, help_text), f"COMMANDS[{name!r}] in dsv_platform/cli/main.py must be ({module!r}, {help_text!r})"
    stale = sorted(set(COMMANDS) - {name for name, _, _ in actual})
    assert not stale, f"COMMANDS in dsv_platform/cli/main.py lists {stale}, which no module in COMMAND_MODULES registers"
    assert index == actual, "COMMANDS must list the commands in COMMAND_MODULES order, each module's in its register() order"


def test_lazy_parser_help_equals_the_full_parser() -> None:
    full = build_parser(load_all=True).format_help()
    assert build_parser().format_help() == full
    for name in COMMANDS:
        assert build_parser(name).format_help() == full, name


def test_each_command_builds_its_real_parser(capsys: pytest.CaptureFixture[str]) -> None:
    from dsv_platform.cli.main import main

    for name in COMMANDS:
        with pytest.raises(SystemExit) as exc:
            main([name, "--help"])
        assert exc.value.code == 0, name
        out = capsys.readouterr().out
        assert out.startswith(f"usage: dsv {name}"), (name, out[:200])


EDGE_ARGVS = [[], ["--help"], ["-h", "resolve"], ["nope"], ["resolve"], ["-x", "resolve", "a"], ["--", "hash", "-h"], ["alias"], ["versions", "x", "--bad"]]


def test_lazy_dispatch_behaves_like_the_full_parser(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from dsv_platform.cli import main as cli

    def run(argv: list[str]) -> tuple[object, str, str]:
        try:
            code: object = cli.main(argv)
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    lazy = [run(argv) for argv in EDGE_ARGVS]
    full_parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda command=None, load_all=False: full_parser(load_all=True))
    for argv, got in zip(EDGE_ARGVS, lazy, strict=True):
        assert got == run(argv), argv


def probe(tmp_path: Path, *argv: str) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "AWS_"))}
    env["DSV_HOME"] = str(tmp_path / "home")
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return doc


@pytest.mark.parametrize(
    ("argv", "code"),
    [(("--help",), 0), (("resolve", "startup_probe:v1"), 3), (("resolve", "--help"), 0)],
    ids=["help", "resolve", "resolve-help"],
)
def test_light_commands_import_no_heavy_package(tmp_path: Path, argv: tuple[str, ...], code: int) -> None:
    doc = probe(tmp_path, *argv)
    assert doc["code"] == code, doc["err"]
    loaded = [m for m in HEAVY if m in doc["modules"]]  # type: ignore[operator]
    assert not loaded, f"`dsv {' '.join(argv)}` imports {loaded}; import them where they are used (python -X importtime shows who)"
    if argv == ("--help",):
        commands = sorted(m for m in doc["modules"] if str(m).endswith("_cmd"))  # type: ignore[attr-defined]
        assert commands == [], commands


def test_resolving_a_published_realization_imports_no_heavy_package(tmp_path: Path) -> None:
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.settings import load_settings
    from dsv_platform_tests.services import publisher_worker as pw

    with build_platform(load_settings({"DSV_HOME": str(tmp_path / "home")})) as platform:
        pw.register(platform.registry)
        pw.build(platform.registry, platform.store, "startup-1", parts=pw.partitions(rows=10))
    for argv in (("resolve", f"{pw.NAME}:{pw.VERSION}"), ("versions", pw.NAME)):
        doc = probe(tmp_path, *argv)
        assert doc["code"] == 0, doc["err"]
        loaded = [m for m in HEAVY if m in doc["modules"]]  # type: ignore[operator]
        assert not loaded, f"`dsv {' '.join(argv)}` imports {loaded}; import them where they are used (python -X importtime shows who)"


def test_landing_index_name_matches_the_adapter() -> None:
    from dsv_platform import bootstrap
    from dsv_platform.adapters.objects import landing

    assert bootstrap.INDEX_FILE == landing.INDEX_FILE


def test_join_type_check_matches_arrow_types() -> None:
    from dsv_platform.core.config.platform_config import arrow_identity
    from dsv_platform.core.contracts.contract import parse_contract

    types: list[dict[str, object]] = [
        {"type": t} for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string", "date", "binary")
    ]
    types += [{"type": "float32", "scale": 2}, {"type": "float64", "scale": 2}, {"type": "float64", "scale": 3}]
    types += [{"type": "timestamp", "resolution": r} for r in ("s", "ms", "us", "ns")]
    types += [{"type": "decimal", "precision": p, "scale": s} for p, s in ((10, 2), (10, 3), (12, 2), (40, 2))]
    columns = [{"name": "id", "type": "int64"}] + [{"name": f"c{i}", **t} for i, t in enumerate(types)]
    contract = parse_contract({"name": "t", "key": ["id"], "columns": columns}, source="test")
    cols = [contract.column(f"c{i}") for i in range(len(types))]
    for a in cols:
        for b in cols:
            assert (arrow_identity(a) == arrow_identity(b)) == (a.arrow_type == b.arrow_type), (a, b)
