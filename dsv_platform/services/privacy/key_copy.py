"""`dsv keys copy --to TARGET`: move a deployment's crypto-erasure keys to another key store (a folder to PostgreSQL).

The operator's (the same role as GC apply and grants); audited before copying (``keys.copy.start``) and after the
verified copy (``keys.copy``, with the counts and the set's digest, never a key). The copy and its checks:
adapters/objects/key_copy.py. Details: docs/gc-and-privacy.md, "Moving the keys to another key store".
"""

from __future__ import annotations

from pathlib import Path

from dsv_platform.adapters.objects.key_copy import CopyReport, copy_keys, read_set
from dsv_platform.adapters.objects.store_factory import build_key_store
from dsv_platform.bootstrap import Platform
from dsv_platform.core.errors import ConfigurationError, mask_url
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust.trust import gatekeeper

URL_SCHEMES = ("postgresql://", "postgresql+psycopg2://")


def target_location(text: str) -> tuple[Path | None, str | None]:
    """``--to`` as (folder, None) or (None, database URL); another URL is refused with its password masked."""
    value = text.strip()
    if not value:
        raise ConfigurationError("--to: name the target key store (postgresql+psycopg2://USER@HOST/DB or a folder)")
    if "://" not in value:
        return Path(value).resolve(), None
    if not value.startswith(URL_SCHEMES):
        raise ConfigurationError(f"--to {mask_url(value)!r}: a key store is a folder or postgresql+psycopg2://USER@HOST/DB")
    return None, value


def copy_key_store(platform: Platform, to: str) -> tuple[str, str, CopyReport]:
    """Copy the configured key store (``DSV_KEY_STORE``) to ``to`` and verify; (source, target, report), both names masked."""
    gate = gatekeeper(platform)
    gate.require(Role.OPERATOR)
    folder, url = target_location(to)
    settings = platform.settings
    source_name = platform.describe()["key_store"]
    target_name = mask_url(url) if url else str(folder)
    same = url == settings.key_store_url if url else settings.key_store_url is None and folder == Path(settings.key_store).resolve()
    if same:
        raise ConfigurationError(f"--to {target_name}: that is the configured key store itself (DSV_KEY_STORE); name another one")
    source = platform.store.keys
    target = build_key_store(folder or Path(), url)
    try:
        where = f"key-store:{target_name}"
        gate.audit("keys.copy.start", where, detail={"from": source_name, **read_set(source).counts()})
        report = copy_keys(source, target, source_name=source_name, target_name=target_name)
        gate.audit("keys.copy", where, detail={"from": source_name, **report.counts, "generation": report.generation, "digest": report.digest})
    finally:
        target.close()
    return source_name, target_name, report


__all__ = ["copy_key_store", "target_location"]
