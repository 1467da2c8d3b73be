"""The key of subject hashes: a 32-byte secret in a file held apart from the registry and the data home.

With it a subject is recorded as HMAC-SHA256(key, salted hash), so the registry and the home together no
longer recover a deleted subject by enumerating candidate ids (the salt alone is in the home's key store).

Details: docs/gc-and-privacy.md, "What the deletion keeps".
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from dsv_platform.core.errors import EnvironmentSetupError

KEY_BYTES = 32


def load_subject_key(path: Path) -> bytes:
    """The key at ``path`` (``Settings.subject_key_path``), created (0600 in a 0700 folder, first writer wins) if absent."""
    try:
        return _read(path)
    except FileNotFoundError:
        pass
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(KEY_BYTES))
            out.flush()
            os.fsync(out.fileno())
        os.link(tmp, path)  # atomic: a concurrent first use links its own key first, and both read that one
    except FileExistsError:
        pass
    except OSError as exc:
        raise EnvironmentSetupError(f"DSV_SUBJECT_KEY_FILE: cannot create the subject-hash key {path} ({exc.strerror})") from exc
    finally:
        tmp.unlink(missing_ok=True)
    return _read(path)


def _read(path: Path) -> bytes:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise EnvironmentSetupError(f"DSV_SUBJECT_KEY_FILE: cannot read the subject-hash key {path} ({exc.strerror})") from exc
    if len(data) != KEY_BYTES:
        raise EnvironmentSetupError(f"DSV_SUBJECT_KEY_FILE: {path} holds {len(data)} bytes, not a {KEY_BYTES}-byte subject-hash key")
    return data


__all__ = ["load_subject_key"]
