"""`dsv approve` / `dsv revoke` and the protected-alias rule through the CLI's ``main`` (SQLite and PostgreSQL), in process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsv_platform.adapters.objects.local_store import LocalObjectStore
from dsv_platform.adapters.registry.registry import Registry
from dsv_platform.cli.main import main
from dsv_platform.core.publication.states import RealizationState
from dsv_platform_tests.core.config_support import write_config
from dsv_platform_tests.services import publisher_worker as pw
from dsv_platform_tests.services.test_publisher import backend_url

__all__ = ["backend_url"]

S = RealizationState
BASE = f"{pw.NAME}:{pw.VERSION}"


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def dsv(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path):  # type: ignore[no-untyped-def]
    """``dsv(*args, url=..., config=None)``: run the CLI in process with the DSV_* environment of a test home."""

    def run(*args: str, url: str, config: Path | None = None) -> Result:
        env = {"DSV_HOME": str(tmp_path), "DSV_REGISTRY_URL": url, "DSV_OBJECT_STORE": str(tmp_path / "objects"), "DSV_ACTOR": "tester"}
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        if config is None:
            monkeypatch.delenv("DSV_CONFIG_DIR", raising=False)
        else:
            monkeypatch.setenv("DSV_CONFIG_DIR", str(config))
        code = main(list(args))
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def refused(result: Result, code: int, *names: str) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("dsv: error:") and "Traceback" not in result.stderr, result.stderr
    for name in names:
        assert name in result.stderr, (name, result.stderr)


def two_realizations(url: str, tmp_path: Path) -> tuple[str, str]:
    store = LocalObjectStore(tmp_path / "objects")
    with Registry.from_url(url) as reg:
        pw.register(reg)
        hashes = [pw.build(reg, store, f"r-{seed}", logical_key=str(seed), parts=pw.partitions(seed=seed)).manifest.manifest_hash for seed in (3, 5)]
    return hashes[0], hashes[1]


def test_approve_revoke_and_production(backend_url: str, tmp_path: Path, dsv) -> None:  # type: ignore[no-untyped-def]
    h1, h2 = two_realizations(backend_url, tmp_path)
    env = {"url": backend_url}
    prod = f"{BASE}@production"
    refused(dsv("alias", "set", prod, h1, **env), 16, "'production'", f"{BASE}@sha256:{h1}", "PUBLISHED", "dsv approve")
    refused(dsv("approve", f"{BASE}@sha256:{h1}", "--reason", " ", **env), 2, "--reason")

    approved = dsv("approve", f"{BASE}@sha256:{h1}", "--reason", "quality report reviewed", "--json", **env)
    assert approved.returncode == 0, approved.stderr
    doc = json.loads(approved.stdout)
    # the actor recorded is the identity that proved its key (admin), not DSV_ACTOR=tester (issue 24 item 6)
    assert (doc["state"], doc["changed"], doc["actor"], doc["reason"]) == ("ELIGIBLE", True, "admin", "quality report reviewed")
    again = dsv("approve", f"{BASE}@sha256:{h1}", "--reason", "again", **env)
    assert again.returncode == 0 and "already ELIGIBLE" in again.stdout, again
    assert dsv("alias", "set", prod, h1, **env).returncode == 0
    assert dsv("alias", "set", f"{BASE}@staging", h2, **env).returncode == 0, "an unprotected alias may point at PUBLISHED"

    refused(dsv("revoke", prod, "--reason", "label leak", **env), 16, "production", "--force")
    forced = dsv("revoke", prod, "--reason", "label leak", "--force", "--json", **env)
    assert forced.returncode == 0, forced.stderr
    doc = json.loads(forced.stdout)
    assert (doc["state"], doc["changed"], doc["protected_aliases"]) == ("PUBLISHED", True, ["production"])

    with Registry.from_url(backend_url) as reg:
        r1 = reg.resolve(pw.NAME, pw.VERSION, h1)
        assert [(e.to_state, e.actor, e.reason.split(" (")[0]) for e in reg.events(r1.id)][-2:] == [
            (S.ELIGIBLE, "admin", "quality report reviewed"),
            (S.PUBLISHED, "admin", "label leak"),
        ]
        reg.transition(reg.resolve(pw.NAME, pw.VERSION, h2).id, S.QUARANTINED, reason="review", actor="tests")
    refused(dsv("approve", f"{BASE}@sha256:{h2}", "--reason", "fine", **env), 15, "QUARANTINED")
    refused(dsv("approve", f"{BASE}@nope", "--reason", "fine", **env), 3, "nope")


def test_protected_aliases_come_from_platform_yaml(tmp_path: Path, dsv) -> None:  # type: ignore[no-untyped-def]
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    h1, _ = two_realizations(url, tmp_path)
    config = write_config(tmp_path / "config", {"platform.yaml": "protected_aliases: [prod, gold]\n"})
    env = {"url": url, "config": config}
    assert dsv("alias", "set", f"{BASE}@production", h1, **env).returncode == 0, "production is not in this folder's list"
    refused(dsv("alias", "set", f"{BASE}@prod", h1, **env), 16, "'prod'")
    refused(dsv("alias", "set", f"{BASE}@gold", h1, **env), 16, "'gold'")
    assert dsv("approve", f"{BASE}@sha256:{h1}", "--reason", "ok", **env).returncode == 0
    moved = dsv("alias", "set", f"{BASE}@gold", h1, **env)
    assert moved.returncode == 0, moved.stderr
    bad = write_config(tmp_path / "bad", {"platform.yaml": "protected_aliases: production\n"})
    refused(dsv("approve", f"{BASE}@sha256:{h1}", "--reason", "ok", url=url, config=bad), 2, "protected_aliases")
