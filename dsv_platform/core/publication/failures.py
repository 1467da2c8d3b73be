"""The failure table: every failure kind with its exit code, audit outcome and one-line meaning.

Error classes name their kind (``kind = FailureKind.NOT_FOUND``), never a number; ``exc.exit_code``
and every code a ``dsv`` command returns come from here. The README's and docs/reliability.md's
exit-code tables are :func:`markdown_table` (dsv_platform_tests/core/test_failures.py checks it).
core/errors.py sits below every capability package and imports none: this module imports it and
binds the codes there when imported, which ``dsv_platform/core/__init__.py`` does first.

Details (audit outcomes, shared codes, adding a kind): docs/reliability.md, "The failure table".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dsv_platform.core.errors import FailureKind, bind_exit_codes

K = FailureKind


@dataclass(frozen=True)
class Failure:
    """One row: a kind, its exit code, the outcome an audit records for it (resolution kinds only), and its meaning."""

    kind: FailureKind
    exit_code: int
    meaning: str
    audit: str | None = None  # a core.reproduction Outcome value; None: not a resolution failure
    shares_with: tuple[FailureKind, ...] = ()  # kinds that knowingly share this exit code (both rows name each other)
    transient: bool = False  # a retry may succeed (a service that did not answer); never a verdict on data, trust or state

    @property
    def resolution(self) -> bool:
        """Whether a reference's resolution fails with this kind (a ResolutionError carries it)."""
        return self.audit is not None


FAILURES: tuple[Failure, ...] = (
    Failure(
        K.FAILED,
        1,
        "the command ran and what it ran failed: a reproduction or rehearsal that is not reconstructable (`dsv reproduce`, `dsv rehearse`), "
        "a Dagster run (`dsv ingest`, `dsv build`, also with `--submit`: run and failing steps named), a demo check, "
        "`dsv conformance --check` vectors that differ, a `dsv keys copy` whose target key store, read back, differs from the source "
        "(what differs named)",
    ),
    Failure(
        K.INVALID,
        2,
        "bad input or a refused request: a malformed argument, reference, contract, data, plan file or artifact manifest, a contract violation, "
        "a conflict, an illegal transition, a broken audit chain (`dsv audit --verify`); the message names the file, column, row key or value",
    ),
    Failure(K.NOT_FOUND, 3, "no such dataset, version, manifest hash or alias (never falls through to a similar one)", audit="NOT_FOUND"),
    Failure(K.REDACTED, 4, "removed by a privacy deletion; the answer carries the redaction generation", audit="REDACTED"),
    Failure(K.EXPIRED, 5, "collected by retention/GC; the record remains, the data does not", audit="EXPIRED"),
    Failure(
        K.CORRUPT,
        6,
        "a stored manifest or object does not hash to its name, or a pinned canonical data file no longer has the digest recorded when "
        "the platform wrote it (table and file named)",
        audit="CORRUPT",
    ),
    Failure(
        K.ACCESS_DENIED,
        7,
        "the caller may not do this: no grant for the role (identity, role and scope named), an approver approving what it built, "
        "a missing or mismatched identity key",
        audit="NOT_FOUND",
    ),
    Failure(
        K.PROMOTION_REFUSED,
        8,
        "`dsv promote` refused by the promotion gate, naming the missing evidence (NOT_ELIGIBLE: the training realization is not approved)",
    ),
    Failure(
        K.BREAKING,
        9,
        "a check's verdict blocks: `dsv contract check` with a failed blocking rule (column, rule, observed value and bound named), "
        "`dsv schema diff` with a breaking change, `dsv ingest` of a source whose changed contract its canonical table cannot take (change named)",
    ),
    Failure(
        K.SERVICE_UNREACHABLE,
        10,
        "PostgreSQL does not answer within the 5 s connect timeout (the URL named, its password masked), "
        "the S3 endpoint does not answer (endpoint and store named), or the Dagster webserver `--submit` sends to does not (URL named)",
        transient=True,
    ),
    Failure(K.FILE_ACCESS, 11, "a file or folder named on the command line cannot be read or written (`--plan`, `--write`, `--out`)"),
    Failure(
        K.NOT_DIFFABLE,
        12,
        "`dsv diff` of two realizations that cannot be compared: different keys (both named), a key that is not unique, "
        "a `--label` column that is not bool or integer",
    ),
    Failure(
        K.UNTRUSTED,
        13,
        "the realization's signed statement is missing, does not verify under the signer's registered key, signs another manifest hash, "
        "or was signed by an identity without the publisher role (ref and reason named); an audit entry, checkpoint or export whose "
        "signature does not fit (`dsv audit --verify`: entry named)",
        audit="UNTRUSTED",
    ),
    Failure(
        K.QUARANTINED,
        14,
        "the realization is quarantined pending review (a read, or an alias move: alias and quarantine named); "
        "`dsv status` says who quarantined it and why",
        audit="NOT_FOUND",
    ),
    Failure(
        K.APPROVAL_STATE,
        15,
        "`dsv approve`/`revoke` of a realization whose state does not allow it (FAILED, QUARANTINED, REDACTED, EXPIRED, ...; the state named)",
    ),
    Failure(
        K.PROTECTED_ALIAS,
        16,
        "a protected alias would point at a realization (or a model version: `dsv model alias set`) that is not ELIGIBLE, "
        "or a revoke while one points at it (alias, ref and state named)",
    ),
    Failure(
        K.CONSUMER_BROKEN,
        17,
        "a definition version re-registered with a contract that breaks a registered consumer (consumer, column and change named)",
    ),
    Failure(
        K.ENVIRONMENT,
        18,
        "a `DSV_*` setting names something unusable: a malformed `DSV_REGISTRY_URL`, `DSV_STRICT` or `DSV_BUILD_JOBS`, "
        "a `DSV_HOME` that cannot be created or written, a full disk (read-only commands still work), S3 without credentials, "
        "a missing DuckDB wheel, a `dsv audit --export s3://` bucket without Object Lock (bucket named), "
        "a `--submit`/`DSV_DAGSTER_URL` webserver that is not a Dagster webserver, refuses the launch or serves no such job (job named)",
    ),
    Failure(
        K.QUARANTINE_STATE,
        19,
        "a `dsv quarantine`/`release` step the quarantine's state does not allow: quarantining what an active quarantine holds, "
        "a second release request, approving a release nobody requested (quarantine and state named)",
    ),
    Failure(
        K.ROWS_REJECTED,
        20,
        "`dsv ingest` landed a batch with rows its contract rejects: the accepted rows stay landed (append-only); the first rejected rows "
        "are printed with key, column, rule and value, every one is in the rejected-rows file the output names (and in `--json`)",
    ),
    Failure(
        K.DETACHED,
        21,
        "`dsv build`/`dsv ingest --submit` stopped following its run (Ctrl-C): the run goes on on the instance; "
        "the run id and where to follow it are named",
    ),
    Failure(K.INTERNAL, 70, "an unexpected exception caught at the CLI boundary: a bug, still one line"),
)

BY_KIND: Mapping[FailureKind, Failure] = {f.kind: f for f in FAILURES}

HEADER = ("kind", "exit code", "audit outcome", "meaning")


def exit_code(kind: FailureKind) -> int:
    """The exit code of ``kind``."""
    return BY_KIND[kind].exit_code


def transient(kind: FailureKind) -> bool:
    """Whether a step that failed with ``kind`` may be retried (the failure table's ``transient`` rows: SERVICE_UNREACHABLE)."""
    return BY_KIND[kind].transient


def markdown_table() -> list[str]:
    """The table as the README and docs/reliability.md print it, one line a row."""
    rows = [HEADER, *((f.kind.name, str(f.exit_code), f.audit or "-", f.meaning) for f in FAILURES)]
    lines = [f"| {' | '.join(row)} |" for row in rows]
    lines.insert(1, "|" + "---|" * len(HEADER))
    return lines


def summary() -> str:
    """``1 FAILED, 2 INVALID, ...``: every code and its kind on one line (``dsv --help``)."""
    return ", ".join(f"{f.exit_code} {f.kind.name}" for f in FAILURES)


bind_exit_codes({f.kind: f.exit_code for f in FAILURES})
