"""`dsv split assign` through the installed console script."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from dsv_platform.cli.split_cmd import assign_stream, read_line_batches
from dsv_platform.core.splits.hash_split import HashSplitPolicy

DSV = Path(sys.executable).parent / "dsv"
SPLITS = "train=80,validation=90,test=100"


def reference_split(identifier: str, salt: str = "fraud_v6") -> str:
    bucket = int(hashlib.sha256(f"{salt}:{identifier}".encode()).hexdigest(), 16) % 100
    return "train" if bucket < 80 else "validation" if bucket < 90 else "test"


def run(stdin: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(DSV), "split", "assign", *args], input=stdin, capture_output=True, timeout=120, check=False)


def test_split_assign_cli_matches_reference_line_by_line() -> None:
    ids = [f"user_{i}" for i in range(2000)] + ["", "ü", unicodedata.normalize("NFD", "Amélie"), "a\tb", " padded "]
    result = run(("\n".join(ids) + "\n").encode(), "--salt", "fraud_v6", "--splits", SPLITS)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    expected = [reference_split(unicodedata.normalize("NFC", i)) for i in ids]
    assert result.stdout.decode().split("\n") == [*expected, ""]


def test_split_assign_cli_strips_only_crlf_and_keeps_last_unterminated_line() -> None:
    result = run(b"a\r\nb\r\r\nc", "--salt", "s", "--splits", "x=50,y=100")
    assert result.returncode == 0, result.stderr
    expected = []
    for identifier in ("a", "b\r", "c"):
        bucket = int(hashlib.sha256(f"s:{identifier}".encode()).hexdigest(), 16) % 100
        expected.append("x" if bucket < 50 else "y")
    assert result.stdout.decode().splitlines() == expected


def test_split_assign_cli_empty_input_prints_nothing() -> None:
    result = run(b"", "--salt", "s", "--splits", SPLITS)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")


def test_split_assign_cli_modulus_option() -> None:
    result = run(b"k1\nk2\n", "--salt", "s", "--splits", "a=3,b=7", "--modulus", "7")
    assert result.returncode == 0, result.stderr
    buckets = [int(hashlib.sha256(f"s:{k}".encode()).hexdigest(), 16) % 7 for k in ("k1", "k2")]
    assert result.stdout.decode().splitlines() == ["a" if b < 3 else "b" for b in buckets]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--splits", "train=80,validation=90,test=99"), "test=99"),
        (("--splits", "train=80,validation=70,test=100"), "validation=70"),
        (("--splits", "train=80,train=100"), "'train'"),
        (("--splits", "train80"), "train80"),
        (("--splits", SPLITS, "--modulus", "ten"), "'ten'"),
        (("--splits", SPLITS, "--modulus", "90"), "modulus 90"),
    ],
)
def test_split_assign_cli_bad_policy_exits_2_with_one_line(args: tuple[str, ...], named: str) -> None:
    result = run(b"a\n", "--salt", "s", *args)
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("dsv: error: ")
    assert named in lines[0]


def test_split_assign_cli_invalid_utf8_names_the_line() -> None:
    result = run(b"ok\n\xff\xfe\n", "--salt", "s", "--splits", SPLITS)
    assert result.returncode == 2
    assert result.stderr.decode().splitlines() == [result.stderr.decode().strip()]
    assert "stdin line 2" in result.stderr.decode()


def test_assign_stream_batches_preserve_order_across_block_boundaries() -> None:
    ids = [f"id{i}é" for i in range(300)]
    data = ("\r\n".join(ids) + "\r\n").encode()
    batches = list(read_line_batches(io.BytesIO(data), block_bytes=17))
    assert len(batches) > 10
    policy = HashSplitPolicy.from_bounds("fraud_v6", SPLITS)
    sink = io.BytesIO()
    assert assign_stream(policy, io.BytesIO(data), sink, block_bytes=17) == 300
    assert sink.getvalue().decode().splitlines() == [reference_split(i) for i in ids]
