"""Step retries for transient failures only, and the publication pool (docs/reliability.md, "Retries").

Every platform step carries :data:`STEP_RETRY` and runs its body under :func:`retried_if_transient`:
an error whose kind the failure table marks transient (SERVICE_UNREACHABLE: PostgreSQL or S3 did not
answer) propagates and Dagster retries the step with exponential backoff and jitter; any other error
(a gate, contract, trust or state verdict, a bug) becomes a ``dg.Failure`` that bypasses the policy,
raised from the error (the CLI still reads its kind). The publishing steps hold a slot of
:data:`PUBLICATION_POOL`; deploy/dagster.yaml limits every pool to one slot.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from dsv_platform.core.errors import DsvError
from dsv_platform.core.publication.failures import transient

PUBLICATION_POOL = "dsv_publication"
"""The Dagster pool of the steps that publish realizations (the snapshot asset, a fan-out's seal): one at a time on an instance."""

STEP_RETRY = dg.RetryPolicy(max_retries=3, delay=5, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)
"""Up to 3 retries, about 5 s, 10 s, 20 s apart (plus or minus jitter), of a step that failed transiently."""


@contextmanager
def retried_if_transient() -> Iterator[None]:
    """Let a transient platform error through to :data:`STEP_RETRY`; make every other error a Failure no policy retries."""
    try:
        yield
    except (dg.Failure, dg.RetryRequested):
        raise  # Dagster's own outcomes; our Failures say allow_retries=False where a retry cannot help
    except DsvError as exc:
        if transient(exc.kind):
            raise
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    except Exception as exc:  # an unexpected error: a bug is not retried (fail closed)
        raise dg.Failure(description=f"{type(exc).__name__}: {exc}", allow_retries=False) from exc
