"""Issue 24 item 11: look-alike identity names and hostile bytes in error lines.

A name validated with ``^...$`` accepted a trailing newline (``alice\\n``: a look-alike identity and key file);
an error line echoed terminal escapes and bidirectional overrides from a file or an argument raw.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsv_platform.bootstrap import build_platform
from dsv_platform.cli.main import printable
from dsv_platform.core.errors import ConfigurationError, ReferenceSyntaxError
from dsv_platform.core.publication.records import check_alias_name, check_name
from dsv_platform.services.trust import trust
from dsv_platform.settings import load_settings
from dsv_platform_tests.fixtures.cli_runner import DsvCli


@pytest.mark.parametrize("name", ["alice\n", "alice\r\n", "Alice", "al ice", "alice\x1b"])
def test_identity_names_with_a_trailing_newline_or_control_bytes_are_refused(tmp_path: Path, name: str) -> None:
    with build_platform(load_settings({"DSV_HOME": str(tmp_path)})) as p:
        with pytest.raises(ConfigurationError, match="identity name"):
            trust.create_identity(p, name, by="admin")
        assert not list((tmp_path / "identities").glob("alice*")) if (tmp_path / "identities").exists() else True


def test_registry_names_and_aliases_refuse_a_trailing_newline() -> None:
    for check, value in ((check_name, "fraud_training_set\n"), (check_alias_name, "production\n")):
        with pytest.raises(ReferenceSyntaxError, match="must match"):
            check(value)


def test_printable_escapes_control_and_format_characters() -> None:
    assert printable("bad\x1b[31mname \u202eevil\u202c\ttab é ü 中") == "bad\\x1b[31mname \\u202eevil\\u202c\\ttab é ü 中"


def test_an_error_line_never_carries_raw_escapes(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    dsv = DsvCli(capsys, monkeypatch, {"DSV_HOME": str(tmp_path)})
    result = dsv("resolve", "fraud_training_set:v6@\x1b]0;pwned\x07prod")
    assert result.code != 0
    assert "\x1b" not in result.err and "\x07" not in result.err and "\\x1b" in result.err, result.err
