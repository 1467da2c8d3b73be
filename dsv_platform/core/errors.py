"""One error hierarchy for the platform.

Every error the platform raises on purpose derives from :class:`DsvError`.
Resolution failures carry a :class:`FailureKind` and a fixed CLI exit code, so
training code, the CLI and the rehearsal schedule all speak the same words.
"""

from __future__ import annotations

import enum


class DsvError(Exception):
    """Base of every error dsv_platform raises on purpose."""

    exit_code: int = 2


class ConfigurationError(DsvError):
    """A setting or argument is missing or malformed."""


class EnvironmentSetupError(ConfigurationError):
    """A ``DSV_*`` setting names something unusable: a malformed URL, a home that cannot be written, missing credentials (exit 9)."""

    exit_code = 9


class ServiceUnreachableError(DsvError):
    """A configured service (PostgreSQL, the S3 endpoint) does not answer (exit 10); the message names its URL, password masked."""

    exit_code = 10


class FileAccessError(DsvError):
    """A file or folder named on the command line cannot be read or written (exit 11); the message names it."""

    exit_code = 11


INTERNAL_ERROR_EXIT = 70
"""An unexpected exception the CLI caught at its boundary: a bug, still reported on one line."""


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


class FailureKind(enum.Enum):
    """Typed resolution failures, each with its fixed CLI exit code."""

    NOT_FOUND = 3
    REDACTED = 4
    EXPIRED = 5
    CORRUPT = 6
    ACCESS_DENIED = 7
    UNTRUSTED = 13

    @property
    def exit_code(self) -> int:
        return self.value


class ResolutionError(DsvError):
    """A reference did not resolve to exactly one readable realization."""

    kind: FailureKind

    def __init__(self, message: str, *, ref: str | None = None, detail: dict[str, object] | None = None) -> None:
        super().__init__(f"{self.kind.name}: {message}")
        self.ref = ref
        self.detail = dict(detail or {})

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return self.kind.exit_code


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
    """A realization's signed statement is missing, invalid or signed by an identity without the publisher role (exit 13)."""

    kind = FailureKind.UNTRUSTED


QUARANTINED_EXIT = 14


class QuarantinedError(AccessDeniedError):
    """The realization (or raw batch) is quarantined pending review (exit 14); the message names the quarantine and its reason.

    A kind of access denial (``kind`` stays ACCESS_DENIED for callers that branch on it) with its own exit code.
    """

    def __init__(self, message: str, *, ref: str | None = None, detail: dict[str, object] | None = None) -> None:
        super().__init__(message, ref=ref, detail=detail)
        self.args = (f"QUARANTINED: {message}",)

    def __str__(self) -> str:
        return str(self.args[0])

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        return QUARANTINED_EXIT


class AuditChainError(DsvError):
    """The audit log's hash chain does not verify (``dsv audit --verify``, exit 2); the message names the first broken entry."""
