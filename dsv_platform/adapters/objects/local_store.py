"""The object store on a local (or mounted) filesystem.

Writes go to a temporary file under ``<root>/tmp`` (the digest is only known once
the stream is consumed; the same filesystem as ``objects/`` is what makes the
next step atomic), are fsynced, then published with ``os.link`` to the content
address. ``link`` fails if the name exists, so it is a create-if-absent: two
writers racing on one key never leave a partial object and never overwrite one.
Objects are made owner read-only (0400): files are owner-only, folders 0700. Staged parts are replaced with ``os.replace``;
``promote`` hard-links the staged part (no copy), so a promoted part and its
object share an inode until ``abandon`` removes the staged name.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from dsv_platform.adapters.objects.object_store import (
    ObjectInfo,
    ObjectStore,
    StagedObject,
    StagingAttempt,
    check_attempt,
    check_name,
    hash_stream,
    object_key,
)
from dsv_platform.core.errors import ObjectConflictError, ObjectNotFoundError, ObjectStoreError

if TYPE_CHECKING:  # imported where used: opening the store (`dsv resolve`) needs no pyarrow
    import pyarrow.fs as pafs

_HEX = frozenset("0123456789abcdef")


def _utc(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, UTC)


class LocalObjectStore(ObjectStore):
    def __init__(self, root: str | os.PathLike[str], *, verify_writes: bool = True, fsync: bool = True) -> None:
        self.root = Path(root).resolve()
        self.verify_writes = verify_writes
        self.fsync = fsync
        for sub in ("objects/sha256", "staging", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)

    @property
    def location(self) -> str:
        return str(self.root)

    def path(self, digest: str) -> Path:
        """Where the object lives (or would live) on disk."""
        return self.root / object_key(digest)

    # -- objects --------------------------------------------------------
    def _put(self, stream: BinaryIO) -> str:
        tmp, digest, _ = self._write_tmp(stream)
        try:
            return self._publish(tmp, digest)
        finally:
            tmp.unlink(missing_ok=True)

    def _write_tmp(self, stream: BinaryIO) -> tuple[Path, str, int]:
        fd, name = tempfile.mkstemp(dir=self.root / "tmp", prefix="put-")
        tmp = Path(name)
        try:
            with open(fd, "wb", buffering=0) as out:
                digest, size = hash_stream(stream, out.write)
                if self.fsync:
                    os.fsync(out.fileno())
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return tmp, digest, size

    def _publish(self, tmp: Path, digest: str) -> str:
        final = self.path(digest)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(tmp, 0o400)
        try:
            os.link(tmp, final)
        except FileExistsError:
            self._check_existing(digest)
            return digest
        except OSError as exc:
            raise ObjectStoreError(f"cannot create object {digest} at {final}: {exc}") from exc
        if self.fsync:
            self._fsync_dir(final.parent)
        if self.verify_writes:
            try:
                self.verify(digest)
            except ObjectStoreError:
                final.unlink(missing_ok=True)
                raise
        return digest

    def _check_existing(self, digest: str) -> None:
        final = self.path(digest)
        with open(final, "rb") as f:
            actual, _ = hash_stream(f)
        if actual != digest:
            raise ObjectConflictError(
                f"object {digest} already exists at {final} holding bytes that hash to {actual}; "
                "it was not overwritten: the stored object is corrupt, repair or delete it"
            )

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _open_raw(self, digest: str) -> BinaryIO:
        path = self.path(digest)
        try:
            return open(path, "rb")
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"object {digest} not found at {path}") from exc

    def exists(self, digest: str) -> bool:
        return self.path(digest).is_file()

    def size(self, digest: str) -> int:
        path = self.path(digest)
        try:
            return path.stat().st_size
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"object {digest} not found at {path}") from exc

    def delete(self, digest: str) -> bool:
        try:
            self.path(digest).unlink()
        except FileNotFoundError:
            return False
        return True

    def iter_objects(self) -> Iterator[ObjectInfo]:
        base = self.root / "objects" / "sha256"
        for shard in sorted(os.listdir(base)):
            if len(shard) != 2 or not _HEX.issuperset(shard):
                continue
            with os.scandir(base / shard) as entries:
                found = sorted((e.name, e) for e in entries if len(e.name) == 62 and _HEX.issuperset(e.name))
            for name, entry in found:
                try:
                    yield ObjectInfo(shard + name, entry.stat().st_size)
                except FileNotFoundError:  # deleted since listing
                    continue

    def uri(self, digest: str) -> str:
        return self.path(digest).as_uri()

    def arrow_filesystem(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem()

    def arrow_path(self, digest: str) -> str:
        return str(self.path(digest))

    # -- staging --------------------------------------------------------
    def _staged(self, attempt_id: str, name: str | None = None) -> Path:
        base = self.root / "staging" / check_attempt(attempt_id)
        return base if name is None else base / check_name(name)

    def _stage(self, attempt_id: str, name: str, stream: BinaryIO) -> str:
        target = self._staged(attempt_id, name)
        tmp, digest, _ = self._write_tmp(stream)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ObjectStoreError(f"cannot stage {name!r} of attempt {attempt_id} at {target}: {exc}") from exc
        return digest

    def open_staged(self, attempt_id: str, name: str) -> BinaryIO:
        path = self._staged(attempt_id, name)
        try:
            return cast(BinaryIO, open(path, "rb"))
        except (FileNotFoundError, IsADirectoryError) as exc:
            raise ObjectNotFoundError(f"staged part {name!r} of attempt {attempt_id} not found at {path}") from exc

    def list_staged(self, attempt_id: str) -> list[StagedObject]:
        base = self._staged(attempt_id)
        out = []
        for dirpath, _, files in os.walk(base):
            for file in files:
                path = Path(dirpath, file)
                st = path.stat()
                out.append(StagedObject(path.relative_to(base).as_posix(), st.st_size, _utc(st.st_mtime)))
        return sorted(out, key=lambda o: o.name)

    def delete_staged(self, attempt_id: str, name: str) -> bool:
        try:
            self._staged(attempt_id, name).unlink()
        except FileNotFoundError:
            return False
        return True

    def promote(self, attempt_id: str, name: str) -> str:
        source = self._staged(attempt_id, name)
        tmp = self.root / "tmp" / f"promote-{uuid.uuid4().hex}"
        try:
            os.link(source, tmp)  # pin the inode: a concurrent re-stage replaces the name, not these bytes
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"staged part {name!r} of attempt {attempt_id} not found at {source}") from exc
        try:
            with open(tmp, "rb") as f:
                digest, _ = hash_stream(f)
            return self._publish(tmp, digest)
        finally:
            tmp.unlink(missing_ok=True)

    def abandon(self, attempt_id: str) -> int:
        base = self._staged(attempt_id)
        count = sum(len(files) for _, _, files in os.walk(base))
        if base.exists():
            shutil.rmtree(base)
        return count

    def list_staging(self) -> list[StagingAttempt]:
        out = []
        for attempt in sorted(os.listdir(self.root / "staging")):
            base = self.root / "staging" / attempt
            latest, count, total = base.stat().st_mtime, 0, 0
            for dirpath, _, files in os.walk(base):
                latest = max(latest, os.stat(dirpath).st_mtime)
                for file in files:
                    st = os.stat(os.path.join(dirpath, file))
                    latest, count, total = max(latest, st.st_mtime), count + 1, total + st.st_size
            out.append(StagingAttempt(attempt, _utc(latest), count, total))
        return out


__all__ = ["LocalObjectStore"]
