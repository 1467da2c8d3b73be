"""Signed launch requests: who launched a Dagster run, proven by the launcher's key, recorded as the builder (docs/trust.md).

:func:`launch_tags` is the launcher's side (``dsv build``, ``dsv build --launch-tags`` for the Launchpad, GraphQL or
``dagster job launch --tags``): a DSSE envelope, signed with the launcher's key, of {identity, job, partition, nonce,
at}, in the run tag :data:`LAUNCH_TAG`. :func:`verify_launch` is the service's side, once per run: the signature under
the launcher's certified key, the run's job and partition, the time, and the nonce (claimed by the first run that
shows it). What it cannot prove is recorded as an unverified launch, built as the service identity.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from dsv_platform.adapters.registry.launches import Launch
from dsv_platform.bootstrap import Platform
from dsv_platform.core import canonical_json
from dsv_platform.core.errors import AccessDeniedError, UntrustedError
from dsv_platform.core.trust import dsse
from dsv_platform.core.trust.trust import Role
from dsv_platform.services.trust import trust

LAUNCH_TAG = "dsv/launch"
PARTITION_TAG = "dagster/partition"
PAYLOAD_TYPE = "application/vnd.dsv.launch-request+json"
REQUEST_TYPE = "https://dsv-platform.dev/launch-request/v1"
MAX_AGE = timedelta(hours=24)
"""A launch request older than this proves nothing (a queued run waits less; an old tag copied later is refused)."""
SKEW = timedelta(minutes=5)


def launch_tags(platform: Platform, *, job: str, partition: str | None = None) -> dict[str, str]:
    """The run tags proving the current identity launches ``job`` (over ``partition``): one request, one run."""
    me = trust.current_identity(platform)
    body = {"_type": REQUEST_TYPE, "identity": me.name, "job": job, "partition": partition, "nonce": secrets.token_hex(16),
            "at": datetime.now(UTC).isoformat()}  # fmt: skip
    payload = canonical_json.dumps(body)
    signature = trust.sign_bytes(platform, dsse.pae(PAYLOAD_TYPE, payload), identity=me.name)
    envelope = dsse.Envelope(PAYLOAD_TYPE, payload, (dsse.Signature(dsse.keyid_of(me.public_key), signature),))
    return {LAUNCH_TAG: envelope.to_bytes().decode("ascii")}


class _Unproven(Exception):
    """Why a launch request proves nothing."""


def _request(platform: Platform, text: str) -> dict[str, Any]:
    """The request ``text`` carries, its signature checked under the named identity's certified key."""
    try:
        envelope = dsse.parse_envelope(text.encode("utf-8"))
        body = json.loads(envelope.payload.decode("utf-8"))
    except (dsse.EnvelopeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _Unproven(f"the launch request is malformed ({exc})") from exc
    if envelope.payload_type != PAYLOAD_TYPE or not isinstance(body, dict) or body.get("_type") != REQUEST_TYPE:
        raise _Unproven("the launch request is not a dsv launch request")
    if not all(isinstance(body.get(k), str) for k in ("identity", "job", "nonce", "at")) or not isinstance(body.get("partition"), str | None):
        raise _Unproven("the launch request lacks identity, job, partition, nonce or time")
    name = body["identity"]
    try:
        key = trust.public_key_of(platform, name)
    except UntrustedError as exc:
        raise _Unproven(f"the launcher's key is not certified ({exc})") from exc
    if key is None:
        raise _Unproven(f"the launch request names {name!r}, which is not registered")
    if not any(s.keyid == dsse.keyid_of(key) and trust.verify_signature(key, s.sig, envelope.signed_bytes()) for s in envelope.signatures):
        raise _Unproven(f"the launch request's signature does not verify under {name!r}'s registered key")
    return body


def verify_launch(platform: Platform, tags: Mapping[str, str], *, job: str, run_id: str, now: datetime | None = None) -> Launch:
    """Who launched this run: the identity a valid request in ``tags`` proves, else an unverified launch saying why."""
    base = Launch(service=trust.current_identity(platform).name, run_id=run_id, job=job)
    text = tags.get(LAUNCH_TAG)
    if text is None:
        return base
    try:
        body = _request(platform, text)
        if body["job"] != job or body["partition"] != tags.get(PARTITION_TAG):
            raise _Unproven(f"the launch request is for job {body['job']!r} partition {body['partition']!r}, not this run's")
        try:
            at = datetime.fromisoformat(body["at"])
        except ValueError:
            raise _Unproven(f"the launch request's time {body['at']!r} is not ISO") from None
        moment = now or datetime.now(UTC)
        if at.tzinfo is None or not moment - MAX_AGE <= at <= moment + SKEW:
            raise _Unproven(f"the launch request was made at {body['at']}, outside {MAX_AGE} before this run")
        other = trust.records(platform).claim_nonce(body["nonce"], run_id=run_id, identity=body["identity"])
        if other is not None:
            raise _Unproven(f"the launch request was replayed: run {other} showed it first")
    except _Unproven as why:
        return replace(base, reason=str(why))
    return replace(base, launcher=body["identity"], nonce=body["nonce"], reason="signed launch request")


def with_builder_grant(platform: Platform, launch: Launch, definition: str) -> Launch:
    """``launch`` as it counts for ``definition``: a launcher without a builder grant on it is recorded unverified."""
    if launch.launcher is None:
        return launch
    try:
        trust.require(platform, Role.BUILDER, definition=definition, identity=launch.launcher)
    except (AccessDeniedError, UntrustedError) as exc:
        return replace(launch, launcher=None, reason=f"launcher {launch.launcher!r} may not build {definition} ({exc})")
    return launch
