"""Issue 11 items 7-9: every bad input is refused with ONE line naming the file, key, partition or URL; never a traceback, never exit 0.

Commands run in-process through ``main(argv)``, the cases about the environment (``DSV_*`` and ``AWS_*`` variables)
too, with the ambient ones cleared (:class:`DsvCli`); one of them also runs the installed ``dsv`` as its own process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.cli.main import main
from dsv_platform_tests.fixtures.cli_runner import DsvCli, Result
from dsv_platform_tests.services import gc_support as gs

DSV = str(Path(sys.executable).with_name("dsv"))
CONTRACT = "name: t\nkey: [id]\ncolumns:\n  - {name: id, type: int64}\n  - {name: s, type: string}\n"
BAD_UTF8 = pa.array([b"a", b"b", b"\xff\xfe", b"c"], pa.binary()).view(pa.string())
DsvEnv = Callable[..., Result]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def refused(code: int, err: str, *names: str, exit_code: int | None = None) -> str:
    """One line on stderr, no traceback, a nonzero exit (the given one), naming every one of ``names``."""
    assert code != 0 and "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dsv: error: "), err
    if exit_code is not None:
        assert code == exit_code, (code, err)
    for name in names:
        assert name in lines[0], (name, err)
    return lines[0]


def dsv_process(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DSV_", "AWS_"))}
    return subprocess.run([DSV, *args], env={**clean, **env}, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def dsv_env(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> DsvEnv:
    """``dsv_env(env, *args)``: ``dsv`` in this process with the ambient ``DSV_*`` and ``AWS_*`` variables replaced by ``env``."""

    def run(env: dict[str, str], *args: str) -> Result:
        return DsvCli(capsys, monkeypatch, env, clear=("DSV_", "AWS_"))(*args)

    return run


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "c.yaml").write_text(CONTRACT, encoding="utf-8")
    ids = pa.array([1, 2, 3, 4], pa.int64())
    pq.write_table(pa.table({"id": ids, "s": pa.array(["a", "b", "c", "d"])}), tmp_path / "good.parquet")
    pq.write_table(pa.table({"id": ids, "s": BAD_UTF8}), tmp_path / "bad.parquet")
    pq.write_table(pa.table({"id": ids, "s": pa.array(["a", "a", "b", "b"])}), tmp_path / "parts.parquet")
    pq.write_table(pa.table({"id": ids[:0], "s": pa.array([], pa.string())}), tmp_path / "empty.parquet")
    return tmp_path


# ---------------------------------------------------------------- 7 data


def test_invalid_utf8_is_refused_naming_column_and_row(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "hash", str(files / "bad.parquet"), "--contract", str(files / "c.yaml"))
    refused(code, err, "bad.parquet", "'s'", "row 2", "UTF-8", exit_code=2)
    assert out == ""


def test_invalid_utf8_in_a_partition_column_is_refused_not_a_traceback(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("hash", "canonical"):
        code, out, err = run(capsys, command, str(files / "bad.parquet"), "--contract", str(files / "c.yaml"), "--partition-by", "s")
        refused(code, err, "'s'", "row 2", exit_code=2)
        assert out == ""


def test_canonical_writes_nothing_when_a_partition_fails(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Partition s=a encodes first; the invalid bytes sit in a later partition: nothing at all is written.
    mixed = pa.array([b"a", b"a", b"\xff", b"z"], pa.binary()).view(pa.string())
    pq.write_table(pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "s": mixed}), files / "mixed.parquet")
    out_file = files / "out.txt"
    for extra in ([], ["--out", str(out_file)]):
        code, out, err = run(capsys, "canonical", str(files / "mixed.parquet"), "--contract", str(files / "c.yaml"), "--partition-by", "s", *extra)
        refused(code, err, "mixed.parquet", exit_code=2)
        assert out == ""
    assert not out_file.exists()
    assert not [p for p in files.iterdir() if p.name.startswith(".dsv-canonical-")]


def test_canonical_out_is_written_whole_on_success(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout_text, _ = run(capsys, "canonical", str(files / "parts.parquet"), "--contract", str(files / "c.yaml"), "--partition-by", "s")
    assert code == 0
    code, out, _ = run(
        capsys, "canonical", str(files / "parts.parquet"), "--contract", str(files / "c.yaml"), "--partition-by", "s", "--out", str(files / "o.txt")
    )
    assert code == 0 and out == ""
    assert (files / "o.txt").read_text(encoding="utf-8") == stdout_text != ""


def test_unknown_partition_names_the_partitions_that_exist(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "canonical", str(files / "parts.parquet"), "--contract", str(files / "c.yaml"), "--partition-by", "s", "--partition", "s=zz")
    refused(code, err, "'s=zz'", "s=a", "s=b", exit_code=2)
    assert out == ""


def test_empty_input_is_an_explicit_empty_result_with_a_warning(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "hash", str(files / "empty.parquet"), "--contract", str(files / "c.yaml"))
    assert code == 0 and "rows          0" in out
    assert err.strip() == f"dsv: warning: {files / 'empty.parquet'}: 0 rows; the result is the empty dataset's"
    code, out, err = run(capsys, "canonical", str(files / "empty.parquet"), "--contract", str(files / "c.yaml"))
    assert code == 0 and out == "" and "0 rows" in err


# ---------------------------------------------------------------- 8 administration, 9 arguments and files


def test_contract_with_a_duplicate_key_names_the_key_and_line(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "dup.yaml").write_text(CONTRACT.replace("key: [id]\n", "key: [id]\nkey: [s]\n"), encoding="utf-8")
    code, _, err = run(capsys, "hash", str(files / "good.parquet"), "--contract", str(files / "dup.yaml"))
    refused(code, err, "dup.yaml", "duplicate key 'key' on line 3", exit_code=2)


def test_non_utf8_contract_is_one_line(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (files / "latin1.yaml").write_bytes(CONTRACT.replace("name: t", "name: caf\xe9").encode("latin-1"))
    code, _, err = run(capsys, "hash", str(files / "good.parquet"), "--contract", str(files / "latin1.yaml"))
    refused(code, err, "latin1.yaml", "not UTF-8", "line 1", exit_code=2)


def test_split_salt_with_the_separator_is_refused(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(capsys, "split", "assign", "--salt", "a:b", "--splits", "train=80,validation=90,test=100")
    refused(code, err, "'a:b'", "':'", exit_code=2)
    assert out == ""


def test_conformance_write_to_a_missing_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "nonexistent" / "dir" / "v.json"
    code, _, err = run(capsys, "conformance", "--write", str(target))
    refused(code, err, str(target), exit_code=11)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A data home with published realizations; ``DSV_HOME`` points at it for in-process commands."""
    reg = Registry.from_url(f"sqlite:///{tmp_path / 'registry.db'}")
    h = gs.generate(reg, LocalObjectStore(tmp_path / "objects", fsync=False), 4)
    reg.close()
    monkeypatch.setenv("DSV_HOME", str(tmp_path))
    monkeypatch.setenv("DSV_ACTOR", "tester")
    return tmp_path, h.published[0][1].manifest_hash


def test_retention_add_validates_its_ref(home: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, manifest = home
    code, _, err = run(capsys, "retention", "add", "legal_hold", "../../etc", "--reason", "x")
    refused(code, err, "'../../etc'", exit_code=2)
    code, _, err = run(capsys, "retention", "add", "legal_hold", "realization:" + "0" * 64, "--reason", "x")
    refused(code, err, "realization:" + "0" * 64, exit_code=3)
    code, _, err = run(capsys, "retention", "add", "legal_hold", f"realization:{manifest}", "--reason", "x", "--expires", "notadate")
    refused(code, err, "--expires", "'notadate'", exit_code=2)
    code, _, err = run(capsys, "retention", "list", "--json")
    assert code == 0 and _ == "[]\n"
    code, out, _ = run(capsys, "retention", "add", "legal_hold", f"realization:{manifest}", "--reason", "x")
    assert code == 0 and "retention root #" in out


def test_gc_refuses_bad_window_clock_and_plan_files(home: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = home
    code, _, err = run(capsys, "gc", "plan", "--safety-window-hours", "-5")
    refused(code, err, "--safety-window-hours", exit_code=2)
    code, _, err = run(capsys, "gc", "plan", "--now", "garbage")
    refused(code, err, "--now", "'garbage'", exit_code=2)
    code, _, err = run(capsys, "gc", "apply", "--plan", "/nonexistent")
    refused(code, err, "/nonexistent", exit_code=11)
    (root / "plan.json").write_text('{"format": "nope"}', encoding="utf-8")
    code, _, err = run(capsys, "gc", "apply", "--plan", str(root / "plan.json"))
    refused(code, err, str(root / "plan.json"), exit_code=2)
    code, _, err = run(capsys, "gc", "why", "x", "--plan", str(root / "c.yaml"))
    refused(code, err, "c.yaml", exit_code=11)


def test_malformed_alias_hash_is_usage_not_not_found(home: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "alias", "set", "ds:v1@prod", "garbage")
    refused(code, err, "'garbage'", exit_code=2)
    code, _, err = run(capsys, "alias", "set", "ds:v1@prod", "a" * 64, "--expect", "sha256:xyz")
    refused(code, err, "'sha256:xyz'", exit_code=2)
    code, _, err = run(capsys, "alias", "set", "ds:v1@prod", "a" * 64)
    refused(code, err, exit_code=3)  # well formed but unknown: NOT_FOUND


# ---------------------------------------------------------------- 9 environment (DSV_* and AWS_* variables)


def test_malformed_registry_url(tmp_path: Path, dsv_env: DsvEnv) -> None:
    r = dsv_env({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": "not a url"}, "versions", "x")
    refused(r.code, r.err, "DSV_REGISTRY_URL", "'not a url'", exit_code=18)  # ENVIRONMENT (was 9)
    r = dsv_env({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": "mysql://u:hunter2@h/x"}, "versions", "x")
    line = refused(r.code, r.err, "mysql://u:***@h/x", exit_code=18)
    assert "hunter2" not in line


def test_malformed_registry_url_in_a_process_of_its_own(tmp_path: Path) -> None:
    """The real process too: in this one every module is imported already, so a variable read at import time (a
    traceback before ``main`` runs) would go unseen in process."""
    r = dsv_process({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": "mysql://u:hunter2@h/x"}, "versions", "x")
    line = refused(r.returncode, r.stderr, "mysql://u:***@h/x", exit_code=18)
    assert "hunter2" not in r.stdout + r.stderr and line


def test_unreachable_postgres_fails_fast_with_the_url_masked(tmp_path: Path, dsv_env: DsvEnv) -> None:
    url = "postgresql+psycopg2://u:hunter2@127.0.0.1:1/x"
    started = time.monotonic()
    r = dsv_env({"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": url}, "versions", "x")
    assert time.monotonic() - started < 60, "not fast"
    line = refused(r.code, r.err, "postgresql+psycopg2://u:***@127.0.0.1:1/x", exit_code=10)
    assert "hunter2" not in line


def test_unwritable_home(tmp_path: Path, dsv_env: DsvEnv) -> None:
    (tmp_path / "afile").write_text("x")
    home = tmp_path / "afile" / "home"  # under a regular file: cannot be created, even as root
    r = dsv_env({"DSV_HOME": str(home)}, "gc", "plan")
    refused(r.code, r.err, "DSV_HOME", str(home), exit_code=18)


def test_s3_without_credentials(tmp_path: Path, dsv_env: DsvEnv) -> None:
    env = {
        "DSV_HOME": str(tmp_path),
        "DSV_OBJECT_STORE": "s3://bucket/x",
        "DSV_S3_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_CONFIG_FILE": "/nonexistent",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    r = dsv_env(env, "gc", "plan")
    refused(r.code, r.err, "s3://bucket/x", "credentials", exit_code=18)


def test_unreachable_s3_endpoint_is_exit_10_naming_it(tmp_path: Path, dsv_env: DsvEnv) -> None:
    """Was an internal error (exit 70, botocore's EndpointConnectionError); the secret key never appears."""
    env = {
        "DSV_HOME": str(tmp_path),
        "DSV_OBJECT_STORE": "s3://bucket/x",
        "DSV_S3_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_ACCESS_KEY_ID": "someone",
        "AWS_SECRET_ACCESS_KEY": "hunter2",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    r = dsv_env(env, "gc", "plan")
    line = refused(r.code, r.err, "s3://bucket/x", "http://127.0.0.1:1", "does not answer", exit_code=10)
    assert "hunter2" not in line
