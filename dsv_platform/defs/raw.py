"""raw/<source>: daily partitioned landing of source batches, write-once under content-derived keys."""

import datetime as dt
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from pydantic import Field

from dsv_platform.adapters.objects.drop_prefix import DropObject, Refused, S3DropPrefix, name_reason
from dsv_platform.adapters.objects.landing import LandingRecord, LandingStatus, LandingZone, sanitize_batch_id
from dsv_platform.bootstrap import Platform
from dsv_platform.core.config.source import SourceSpec, partition_text
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.identity.hashing import content_hash
from dsv_platform.core.ingest.batch import parse_batch_file
from dsv_platform.core.ingest.landing_format import EXTENSIONS
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.trust.trust import Role
from dsv_platform.defs import keys
from dsv_platform.defs.catalog import owners
from dsv_platform.defs.metadata import AssetResult, table
from dsv_platform.defs.partitions import partition_days
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.defs.retries import STEP_RETRY, retried_if_transient
from dsv_platform.services.lineage import openlineage
from dsv_platform.services.trust import trust
from dsv_platform.settings import Settings

BATCH_IS_READABLE = "batch_is_readable"
DIGEST_COLUMNS = ["batch", "day", "digest", "rows", "recorded_at", "status"]


class RawBatchConfig(dg.Config):
    """Which files to land (absolute paths or drop-folder names); when empty, the drop-folder files of the run's days."""

    files: list[str] = Field(default_factory=list)
    batch_id: str | None = None  # default: from a drop-folder name (<source>__<day>__<batch id>.<fmt>), else the file's stem
    recorded_at: str | None = None  # a historical load: the ISO time the batches were recorded (operator, audited); default: the platform clock at landing
    recorded_at_files: dict[str, str] = Field(default_factory=dict)  # a historical load per file (file as given in ``files`` -> ISO time)


def outside_reason(path: Path, drop_folder: Path) -> str | None:
    """Why a drop-folder entry must not be landed (it resolves outside the folder: ``..``, a symlink out), else None."""
    folder = drop_folder.resolve()
    target = path.resolve()
    if target == folder or not target.is_relative_to(folder):
        return f"{path.name if path.parent == drop_folder else path}: resolves to {target}, outside the drop folder {folder}"
    return None


def batch_files(spec: SourceSpec, config: RawBatchConfig, drop_folder: Path, days: Sequence[dt.date], skipped: list[str] | None = None) -> list[Path]:
    """The files this run lands: the configured ones, else ``<source>__<day>__*.<fmt>`` of each day in the drop folder.

    A configured drop-folder name that resolves outside the drop folder is refused; a matching entry
    of the folder that does (a symlink out) is left out, its reason appended to ``skipped``.
    Absolute paths are an operator's explicit choice (`dsv ingest FILE`) and land as given.
    """
    if config.files:
        named = [Path(f) if Path(f).is_absolute() else drop_folder / f for f in config.files]
        refused = [reason for f, p in zip(config.files, named, strict=True) if not Path(f).is_absolute() and (reason := outside_reason(p, drop_folder))]
        if refused:
            raise ConfigurationError(f"refused, nothing landed: {'; '.join(refused)}")
        return named
    if not drop_folder.is_dir():
        return []
    ext = EXTENSIONS[spec.landing_format]
    stamps = [d.isoformat() for d in days] if spec.partitioned else ["*"]  # a reference table: every drop-folder file of the source
    found = [p for d in stamps for p in sorted(drop_folder.glob(f"{spec.name}__{d}__*.{ext}"))]
    reasons = {p: outside_reason(p, drop_folder) for p in found}
    if skipped is not None:
        skipped.extend(r for r in reasons.values() if r)
    return [p for p in found if reasons[p] is None]


@contextmanager
def dropped_files(settings: Settings, spec: SourceSpec, config: RawBatchConfig, days: Sequence[dt.date], skipped: list[str]) -> Iterator[list[Path]]:
    """:func:`batch_files` of the drop folder; for an S3 drop prefix (``settings.drop_url``) the same choice of objects, downloaded one
    by one into a temporary folder that is removed when the block ends (a configured name must name an object directly under the prefix)."""
    if settings.drop_url is None:
        yield batch_files(spec, config, settings.drop_folder, days, skipped)
        return
    prefix = S3DropPrefix(settings.drop_url, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region)
    if config.files:
        refused = [reason for f in config.files if not Path(f).is_absolute() and (reason := name_reason(f, prefix.location))]
        if refused:
            raise ConfigurationError(f"refused, nothing landed: {'; '.join(refused)}")
        names = list(config.files)
    else:
        ext = EXTENSIONS[spec.landing_format]
        stamps = [f"{d.isoformat()}__" for d in days] if spec.partitioned else [""]  # a reference table: every object of the source
        found = [e for stamp in stamps for e in prefix.entries(f"{spec.name}__{stamp}")]
        skipped.extend(e.reason for e in found if isinstance(e, Refused))
        names = [e.name for e in found if isinstance(e, DropObject) and e.name.endswith(f".{ext}")]
    with tempfile.TemporaryDirectory(prefix="dsv-drop-") as staged:
        yield [Path(f) if Path(f).is_absolute() else prefix.download(f, Path(staged)) for f in names]


def recorded_time(text: str | None) -> dt.datetime | None:
    if text is None:
        return None
    when = dt.datetime.fromisoformat(text)
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)


def claimed_time(path: Path, config: RawBatchConfig) -> str | None:
    """The recorded time a historical load names for ``path`` (per file, else for the run), or None: the platform's clock decides."""
    by_file = config.recorded_at_files
    return by_file.get(str(path)) or by_file.get(path.name) or config.recorded_at


def file_batch(path: Path, config: RawBatchConfig) -> tuple[str | None, dt.datetime | None]:
    """The batch id (configured, else from a drop-folder name) and the claimed recorded time (None: the platform clock at landing).

    Never the file's modification time: whoever writes the file controls it (docs/trust.md, "Who chooses the recorded time").
    """
    parsed = parse_batch_file(path.name)
    batch_id = config.batch_id or (parsed.batch_id if parsed is not None else None)
    return batch_id, recorded_time(claimed_time(path, config))


def historical_load(platform: Platform, spec: SourceSpec, files: Sequence[Path], config: RawBatchConfig) -> None:
    """A load naming its recorded times needs ``operator``; audited (``ingest.recorded_at``) per claimed time: identity, files, batches."""
    claims: dict[str, list[Path]] = {}
    for path in files:
        if (claim := claimed_time(path, config)) is not None:
            claims.setdefault(claim, []).append(path)
    if not claims:
        return
    trust.require(platform, Role.OPERATOR)
    for claim, paths in sorted(claims.items()):
        batches = [file_batch(p, config)[0] or sanitize_batch_id(p.stem) for p in paths]
        trust.audit(platform, "ingest.recorded_at", f"source:{spec.name}", detail={"recorded_at": claim, "files": [str(p) for p in paths], "batches": batches})


def land_files(
    zone: LandingZone, spec: SourceSpec, files: Sequence[Path], config: RawBatchConfig, progress: Progress = SILENT
) -> list[LandingRecord]:
    """Land each file write-once (``progress``: the stage ``landing``, one file at a time)."""
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise dg.Failure(f"no such batch file(s): {missing}", allow_retries=False)
    landed: list[LandingRecord] = []
    progress.stage("landing", total=len(files), unit="files")
    for path in files:
        batch_id, recorded_at = file_batch(path, config)
        landed += zone.land_file(path, spec, batch_id=batch_id, recorded_at=recorded_at)
        progress.advance(1)
    progress.done()
    return landed


def raw_result(landed: Sequence[LandingRecord], every: Sequence[LandingRecord]) -> AssetResult:
    quarantined = [r for r in landed if r.status is LandingStatus.QUARANTINED]
    landed_now = ", ".join(f"`{r.batch_id}` ({partition_text(r.day)}): {r.status.value}" for r in landed) or "none"
    version = content_hash((f"{r.day}/{r.batch_ref}", r.digest) for r in every if r.loadable)
    return dg.MaterializeResult(
        data_version=dg.DataVersion(version),
        metadata={
            "batches_landed_now": dg.MetadataValue.md(landed_now),
            "object_digests": table(DIGEST_COLUMNS, [(r.batch_id, partition_text(r.day), r.digest, r.rows, r.recorded_at, r.status.value) for r in every]),
            "rows": dg.MetadataValue.int(sum(r.rows for r in every if r.loadable)),
            "partition_version": dg.MetadataValue.text(version),
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=BATCH_IS_READABLE,
                passed=not quarantined,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"quarantined": table(["batch", "digest", "reason"], [(r.batch_id, r.digest, r.reason) for r in quarantined])},
            )
        ],
    )


def build_raw_asset(spec: SourceSpec, partitions: dg.PartitionsDefinition | None) -> dg.AssetsDefinition:
    key = keys.raw(spec.name)

    @dg.asset(
        key=key,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run() if partitions is not None else None,
        group_name="raw",
        owners=owners(spec.contract.owner),
        retry_policy=STEP_RETRY,
        kinds={spec.landing_format},
        check_specs=[dg.AssetCheckSpec(BATCH_IS_READABLE, asset=key, description=f"every landed batch parses as {spec.landing_format}")],
        description=f"{spec.name} source batches ({spec.landing_format}) as they arrived, "
        f"{'one day per partition' if spec.partitioned else 'unpartitioned (a reference table)'}, stored write-once under "
        "their SHA-256. Landing the same bytes again is a no-op; new bytes for a batch id are a new object; unreadable batches are quarantined.",
    )
    def _raw(context: dg.AssetExecutionContext, config: RawBatchConfig, platform: PlatformResource) -> AssetResult:
        with retried_if_transient():
            days = partition_days(context)
            p = platform.get()
            zone = p.landing
            zone.writer = trust.require(p, Role.SOURCE_WRITER, source=spec.name).identity  # recorded per landed batch (docs/trust.md)
            skipped: list[str] = []
            with dropped_files(platform.settings(), spec, config, days, skipped) as files:
                historical_load(p, spec, files, config)  # naming a recorded time: an operator's historical load, audited
                progress = platform.progress(context, f"{spec.name}: ")
                landed = openlineage.landing(p, spec, files, lambda: land_files(zone, spec, files, config, progress))
            for reason in skipped:
                context.log.warning(f"not landed: {reason}")
            every = [r for d in days for r in zone.records(spec.name, d)]
            return raw_result(landed, every)

    return _raw
