"""Issue 23 item 6: a failure inside a Dagster run is one ``dsv`` line with the platform error's exit code.

Before: ``dsv build`` before any ingest printed 84 lines of Dagster ERROR events and stack traces, said
"materialize it first" and exited 1. Now the line says what to run, names the file holding Dagster's log
(with the stack traces), and exits with the code of the error that failed the step.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from dsv_platform.core.errors import FailureKind
from dsv_platform.services.publication.realization_inputs import RealizationBuildError
from dsv_platform_tests.fixtures.cli_runner import DsvCli, run_dsv


def _dsv(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The real ``dsv`` process, not :class:`DsvCli`: the point is the whole of stderr as a terminal gets it. In the test
    process a logging handler bound to an earlier stream (set up at import, or by an earlier test) writes past capsys,
    so an in-process run could miss the 84 lines of Dagster ERROR events this test is about and pass anyway."""
    return run_dsv({"DSV_HOME": str(home)}, *args)


def test_build_before_any_ingest_is_one_line_that_says_what_to_run(tmp_path: Path) -> None:
    done = _dsv(tmp_path / "home", "build", "fraud_training_set:v6")
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    [line] = lines
    assert line.startswith("dsv: error: run ") and "dsv ingest transactions FILE" in line and "materialize it first" not in line
    assert "Traceback" not in done.stderr and "dagster - ERROR" not in done.stderr and "dsv_platform." not in line
    assert done.returncode == RealizationBuildError.kind.exit_code != 1
    match = re.search(r"\(Dagster log: (\S+\.log)\)", line)
    assert match, line
    log = Path(match.group(1)).read_text(encoding="utf-8")
    assert "STEP_FAILURE" in log and "RealizationBuildError" in log and 'File "' in log  # the stack traces are in the file


def test_an_empty_home_answers_resolve_lineage_and_retention_list_with_what_to_do(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A configured definition not yet in the registry: NOT_FOUND says so and what registers it; an empty list says it is empty."""
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path / "home")})
    for args in (("resolve", "fraud_training_set:v6"), ("lineage", "fraud_training_set:v6@production")):
        done = dsv(*args)
        assert done.code == FailureKind.NOT_FOUND.exit_code, done.err
        assert done.err.splitlines() == [
            "dsv: error: NOT_FOUND: no dataset definition fraud_training_set:v6 in the registry "
            "(its first build registers it: dsv build fraud_training_set:v6)"
        ], done.err
    assert dsv("retention", "list").out == "no retention roots in force (--all: released and expired ones too)\n"  # an empty list says so
