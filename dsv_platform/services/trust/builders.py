"""Who built a realization and how it was launched, as its signed statement says, not as rows say (docs/trust.md, "Signed builder and launch").

The approval rules ("the builder may not approve", "an unverified launch is approved only by who could not have launched
it") read the ``realization_builders`` and ``realization_launches`` rows, which an insider with database write access can
change. The publisher signs both into the realization's statement; :func:`signed_build` reads them back from the verified
statement for the approval, and :func:`verify_builders` checks every signed realization's rows (``dsv audit --verify``).
A row that disagrees is UNTRUSTED (exit 13), naming the realization and the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsv_platform.adapters.registry.launches import SignedBuild, launch_from_document
from dsv_platform.core.errors import UntrustedError
from dsv_platform.core.publication.records import Realization
from dsv_platform.core.trust import dsse
from dsv_platform.services.trust import trust
from dsv_platform.services.trust.signing import MISSING, check_signature, signed_statements

if TYPE_CHECKING:
    from dsv_platform.bootstrap import Platform


def _of(statement: dsse.Statement) -> SignedBuild:
    return SignedBuild(statement.builder, launch_from_document(statement.launch), statement.signs_launch)


def signed_build(platform: Platform, realization: Realization) -> SignedBuild | None:
    """The builder and launch the realization's statement signs; None for a realization published before signing (the rows decide).

    A signature that does not verify is UNTRUSTED: nothing signed says who built it, and the rows cannot be taken instead.
    """
    status = check_signature(platform, realization)
    if not status.trusted:
        raise UntrustedError(
            f"{realization.ref}: {status.status} signature: {status.reason}; who built it cannot be checked, so it cannot be approved",
            ref=realization.ref,
            detail={"signature": status.status, "field": "builder"},
        )
    if status.status == MISSING or status.envelope_object is None:
        return None
    return _of(dsse.parse_statement(dsse.parse_envelope(platform.store.get(status.envelope_object, verify=True))))


def verify_builders(platform: Platform) -> int:
    """Every signed realization's builder and launch rows say what its statement signed; UntrustedError naming the first that does not.

    Returns how many were checked; an unreadable envelope is skipped here (``dsv verify`` refuses it).
    """
    checked = 0
    records = trust.records(platform)
    for realization, statement in signed_statements(platform):
        if (problem := records.build_problem(realization, _of(statement))) is not None:
            field, why = problem
            raise UntrustedError(why, ref=realization.ref, detail={"field": field})
        checked += 1
    return checked
