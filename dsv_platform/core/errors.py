"""One error hierarchy for the platform.

Every error the platform raises on purpose derives from :class:`DsvError` and carries a
:class:`FailureKind`; the kind's exit code, audit outcome and meaning are one row of the failure
table (core/publication/failures.py), so training code, the CLI and the rehearsal schedule all
speak the same words. No class here names a number. This module sits below every capability
package and imports none: the table binds the codes here (:func:`bind_exit_codes`) when imported.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import ClassVar


class FailureKind(enum.Enum):
    """Every kind of failure the platform reports, by name (the vocabulary of the failure table).

    The resolution kinds (NOT_FOUND ... QUARANTINED) are the ones a :class:`ResolutionError` carries.
    """

    FAILED = "FAILED"
    INVALID = "INVALID"
    NOT_FOUND = "NOT_FOUND"
    REDACTED = "REDACTED"
    EXPIRED = "EXPIRED"
    CORRUPT = "CORRUPT"
    ACCESS_DENIED = "ACCESS_DENIED"
    PROMOTION_REFUSED = "PROMOTION_REFUSED"
    BREAKING = "BREAKING"
    SERVICE_UNREACHABLE = "SERVICE_UNREACHABLE"
    FILE_ACCESS = "FILE_ACCESS"
    NOT_DIFFABLE = "NOT_DIFFABLE"
    UNTRUSTED = "UNTRUSTED"
    QUARANTINED = "QUARANTINED"
    APPROVAL_STATE = "APPROVAL_STATE"
    PROTECTED_ALIAS = "PROTECTED_ALIAS"
    CONSUMER_BROKEN = "CONSUMER_BROKEN"
    ENVIRONMENT = "ENVIRONMENT"
    QUARANTINE_STATE = "QUARANTINE_STATE"
    ROWS_REJECTED = "ROWS_REJECTED"
    DETACHED = "DETACHED"
    INTERNAL = "INTERNAL"

    @property
    def exit_code(self) -> int:
        """This kind's exit code: its row of the failure table (core/publication/failures.py)."""
        try:
            return _EXIT_CODES[self]
        except KeyError:
            raise RuntimeError(f"no exit code bound for {self.name}: dsv_platform.core.publication.failures was not imported") from None


_EXIT_CODES: dict[FailureKind, int] = {}


def bind_exit_codes(codes: Mapping[FailureKind, int]) -> None:
    """Take every kind's exit code from the failure table; core/publication/failures.py calls it once, when imported."""
    missing = sorted(kind.name for kind in FailureKind if kind not in codes)
    if missing:
        raise RuntimeError(f"the failure table has no row for {', '.join(missing)}")
    _EXIT_CODES.update(codes)


class DsvError(Exception):
    """Base of every error dsv_platform raises on purpose: of kind INVALID unless a subclass names another kind."""

    kind: ClassVar[FailureKind] = FailureKind.INVALID

    @property
    def exit_code(self) -> int:
        """The CLI exit code of this error's kind (the failure table)."""
        return self.kind.exit_code


class ConfigurationError(DsvError):
    """A setting or argument is missing or malformed."""


class EnvironmentSetupError(ConfigurationError):
    """A ``DSV_*`` setting names something unusable: a malformed URL or value, a home that cannot be written, missing credentials."""

    kind = FailureKind.ENVIRONMENT


class ObjectLockMissingError(EnvironmentSetupError):
    """An export asked for an unoverwritable S3 object, but the bucket has no Object Lock: refused (fail closed), the bucket named."""


class DiskFullError(EnvironmentSetupError):
    """The file system under the home (or a file a command writes) has no space left: ENOSPC, SQLite's "database or disk is full"."""


DISK_FULL_TEXTS = ("database or disk is full", "no space left on device")


def is_disk_full(exc: BaseException) -> bool:
    """``exc`` (or an exception it was raised from) says the disk is full: ENOSPC, or SQLite's "database or disk is full"."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if getattr(seen, "errno", None) == 28 or any(t in str(seen).lower() for t in DISK_FULL_TEXTS):  # 28: ENOSPC
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class ServiceUnreachableError(DsvError):
    """A configured service (PostgreSQL, the S3 endpoint) does not answer; the message names its URL, password masked."""

    kind = FailureKind.SERVICE_UNREACHABLE


class FileAccessError(DsvError):
    """A file or folder named on the command line cannot be read or written; the message names it."""

    kind = FailureKind.FILE_ACCESS


def mask_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (for error messages)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    netloc, slash, path = rest.partition("/")
    userinfo, at, host = netloc.rpartition("@")
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    return f"{scheme}{sep}{userinfo}{at}{host}{slash}{path}"


_SECRET_WORDS = ("secret", "token", "password", "credential", "session")


def is_secret(key: str, value: str) -> bool:
    """A credential: a property key naming a secret, token, password or credential, or a URL with a password in it."""
    authority = value.split("://", 1)[1].split("/", 1)[0] if "://" in value else ""
    return any(word in key.lower() for word in _SECRET_WORDS) or ":" in authority.rpartition("@")[0]


class ContractError(DsvError):
    """A contract file is malformed: unknown key, unknown type, missing parameter."""

    def __init__(self, message: str, *, file: str | None = None, column: str | None = None) -> None:
        where = []
        if file:
            where.append(file)
        if column:
            where.append(f"column {column!r}")
        prefix = ": ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.file = file
        self.column = column


class ContractViolationError(DsvError):
    """Data does not satisfy its contract (null or duplicate key, naive timestamp, ...)."""

    def __init__(
        self,
        message: str,
        *,
        column: str | None = None,
        value: object = None,
        row_key: object = None,
        source: str | None = None,
    ) -> None:
        parts = []
        if source:
            parts.append(source)
        if column:
            parts.append(f"column {column!r}")
        if row_key is not None:
            parts.append(f"row key {row_key!r}")
        prefix = ", ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
        self.column = column
        self.value = value
        self.row_key = row_key
        self.source = source


class InputError(DsvError):
    """An input file or stream cannot be read as what it claims to be."""


class SplitPolicyError(DsvError):
    """A split policy is malformed or cannot be applied to the given identifiers."""


class ReferenceSyntaxError(DsvError):
    """A dataset reference string does not parse."""


class ObjectStoreError(DsvError):
    """The object store refused or failed an operation."""


class ObjectConflictError(ObjectStoreError):
    """A write-once key already holds different bytes; nothing was overwritten."""


class ObjectVerificationError(ObjectStoreError):
    """An object read back does not hash to its key."""


class ObjectNotFoundError(ObjectStoreError):
    """No object (or staged part) is stored under the requested key."""


class ObjectErasedError(ObjectStoreError):
    """The object was crypto-erased for a privacy deletion: its key is destroyed and its bytes can never be read again."""


class KeyCopyMismatchError(DsvError):
    """``dsv keys copy`` copied, but the target key store, read back, differs from the source (what differs is named)."""

    kind = FailureKind.FAILED


class RedactionNotReconciledError(DsvError):
    """The object/key store and the registry disagree on the redaction generation (a restored backup): reads are refused.

    Fix: run ``dsv privacy reconcile`` to re-apply the deletions the registry (or the key store) records.
    """


class IllegalTransitionError(DsvError):
    """A realization state transition that the publication protocol forbids."""


class PublicationError(DsvError):
    """The build protocol refused a candidate (duplicate partition, schema disagreement, failed gate)."""


class AliasConflictError(DsvError):
    """A compare-and-swap on an alias lost: its current target is not the expected one."""


class ResolutionError(DsvError):
    """A reference did not resolve to exactly one readable realization; the message starts with the kind's name."""

    def __init__(self, message: str, *, ref: str | None = None, detail: dict[str, object] | None = None) -> None:
        super().__init__(f"{self.kind.name}: {message}")
        self.ref = ref
        self.detail = dict(detail or {})


class NotFoundError(ResolutionError):
    kind = FailureKind.NOT_FOUND


class RedactedError(ResolutionError):
    kind = FailureKind.REDACTED


class ExpiredError(ResolutionError):
    kind = FailureKind.EXPIRED


class CorruptError(ResolutionError):
    kind = FailureKind.CORRUPT


class AccessDeniedError(ResolutionError):
    kind = FailureKind.ACCESS_DENIED


class UntrustedError(ResolutionError):
    """A realization's signed statement is missing, invalid or signed by an identity without the publisher role."""

    kind = FailureKind.UNTRUSTED


class QuarantinedError(ResolutionError):
    """The realization (or raw batch) is quarantined pending review; the message names the quarantine and its reason.

    Its own kind, not an access denial: the caller may read it once the quarantine is released.
    """

    kind = FailureKind.QUARANTINED


class AuditChainError(DsvError):
    """The audit log's hash chain does not verify (``dsv audit --verify``; INVALID); the message names the first broken entry."""


class AuditTamperedError(UntrustedError):
    """The audit log was rewritten, cut short or forged (UNTRUSTED): an entry's signature or a signed checkpoint does not fit it."""


class DataFileCorruptError(CorruptError):
    """A canonical table's data file no longer has the SHA-256 and size recorded when the platform wrote it (CORRUPT; table and file named)."""
