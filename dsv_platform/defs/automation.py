"""Jobs, the daily schedule and the drop-folder sensor, over whatever sources the configuration names."""

import datetime as dt
import functools
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from dsv_platform.adapters.objects.drop_prefix import Refused, S3DropPrefix
from dsv_platform.adapters.objects.landing import scan_days
from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.ingest.batch import parse_batch_file
from dsv_platform.core.ingest.scan_memo import scan_file
from dsv_platform.defs import keys
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.defs.raw import RawBatchConfig, outside_reason
from dsv_platform.defs.resources import PlatformResource

DAILY_JOB = "daily_ingest_job"
REFERENCE_JOB = "reference_ingest_job"
"""The job landing and loading the sources without ``partition_by`` (unpartitioned assets)."""


@dataclass(frozen=True)
class Automation:
    jobs: list[Any]  # unresolved asset jobs
    schedules: list[Any]
    sensors: list[dg.SensorDefinition]


def _stat(path: Path) -> str:
    """What says a file may have changed without reading it: size, mtime, ctime (a writer can set mtime, not ctime), inode."""
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"


@dataclass(frozen=True)
class Seen:
    """A cursor entry: the file's stat and SHA-256 when it was last read (an old cursor's bare digest has no stat)."""

    stat: str
    digest: str

    @staticmethod
    def parse(entry: str) -> "Seen | None":
        if len(entry) == 64 and all(c in "0123456789abcdef" for c in entry):
            return Seen("", entry)  # a cursor written before stats were kept: hashed again once, requested only if changed
        stat, sep, digest = entry.rpartition("@")
        return Seen(stat, digest) if sep and len(digest) == 64 else None

    def __str__(self) -> str:
        return f"{self.stat}@{self.digest}"


def touched_days(path: Path, spec: SourceSpec, named: dt.date) -> tuple[str, list[dt.date]]:
    """The file's SHA-256 and the partition days its accepted rows touch (the file-name day when it does not parse: the raw check says why)."""
    digest, scan = scan_file(path, spec)  # in record batches; remembered, so the run's landing does not read it again in this process
    if scan.malformed or not spec.partitioned:
        return digest, [named]
    arriving = dt.datetime.now(dt.UTC).date()  # a row without a partition value is indexed on its arrival day, as dsv ingest does
    return digest, sorted(scan_days(scan, arriving)) if scan.accepted else []


def drop_request(
    path: Path, digest: str, sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition, days: Sequence[dt.date] | None = None
) -> dg.RunRequest | None:
    """The run landing and loading one drop-folder file, or None if it is not a batch file of a known source, format and day.

    ``days``: the partition days its rows touch (default the file-name day); the run covers their range, so late rows
    for earlier days load with it. A day outside ``partitions`` makes it None (the sensor logs which)."""
    parsed = parse_batch_file(path.name)
    if parsed is None or parsed.source not in sources or sources[parsed.source].landing_format != parsed.format:
        return None
    partitioned = sources[parsed.source].partitioned  # a reference table's file lands whatever its day, in REFERENCE_JOB
    span = sorted(days) if days else [parsed.day]
    first, last = span[0].isoformat(), span[-1].isoformat()
    if partitioned and not (partitions.has_partition_key(first) and partitions.has_partition_key(last)):
        return None
    raw = keys.raw(parsed.source)
    tags = {"dsv/drop_file": path.name, "dsv/digest": digest}
    if partitioned and first != last:
        tags |= {RANGE_START: first, RANGE_END: last}
    return dg.RunRequest(
        run_key=f"{path.name}@{digest}",
        partition_key=first if partitioned and first == last else None,
        job_name=DAILY_JOB if partitioned else REFERENCE_JOB,
        asset_selection=[raw, keys.canonical(parsed.source)],
        run_config=dg.RunConfig(ops={keys.op_name(raw): RawBatchConfig(files=[path.name])}),
        tags=tags,
    )


def _changed(
    name: str, stat: str, before: str | None, sources: Mapping[str, SourceSpec], local: Callable[[], AbstractContextManager[Path]]
) -> tuple[Seen, list[dt.date] | None, bool]:
    """The entry's new cursor value; when its bytes changed, the days its accepted rows touch (None: unchanged); whether
    it is a batch file of a known source in that source's format (only those are scanned). ``local`` gives the bytes as a
    local file (the drop-folder file itself, or an S3 object downloaded): it is called only when ``stat`` changed."""
    seen = Seen.parse(before) if before else None
    if seen is not None and seen.stat == stat:
        return seen, None, False  # unchanged: not even opened
    parsed = parse_batch_file(name)
    spec = sources.get(parsed.source) if parsed is not None else None
    days: list[dt.date] = []
    with local() as path:
        if parsed is None or spec is None or spec.landing_format != parsed.format:
            digest, batch = _digest(path), False
        else:
            (digest, days), batch = touched_days(path, spec, parsed.day), True
    return Seen(stat, digest), (None if seen is not None and seen.digest == digest else days), batch


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class _Tick:
    """One sensor evaluation: the cursor it started from, the one it leaves (only the entries present now: bounded by the
    drop location, not by its history), its run requests and what it logs."""

    before: dict[str, str]
    sources: Mapping[str, SourceSpec]
    partitions: dg.PartitionsDefinition
    seen: dict[str, str] = field(default_factory=dict)
    requests: list[dg.RunRequest] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def never(self, name: str, reason: str) -> None:
        """An entry that is never landed: logged once per reason, not every tick."""
        if self.before.get(name) != reason:
            self.outside.append(reason)
        self.seen[name] = reason

    def entry(self, name: str, stat: str, local: Callable[[], AbstractContextManager[Path]]) -> None:
        entry, days, batch = _changed(name, stat, self.before.get(name), self.sources, local)
        self.seen[name] = str(entry)
        if days is None:
            return
        if batch and not days:
            self.refused.append(name)  # every row rejected: nothing to land
            return
        request = drop_request(Path(name), entry.digest, self.sources, self.partitions, days) if batch else None
        if request is None:
            self.skipped.append(name)
        else:
            self.requests.append(request)

    def log(self, context: dg.SensorEvaluationContext) -> None:
        for reason in self.outside:
            context.log.warning(f"skipped, never landed: {reason}")
        if self.skipped:
            context.log.warning(
                "not landed: not a batch file (expected <source>__<YYYY-MM-DD>__<batch id>.<the source's format> for a known source) "
                f"or rows on a day outside the partitions: {self.skipped}"
            )
        if self.refused:
            context.log.warning(
                "not landed: no row to land (an empty file, or no row satisfies the source's contract: "
                f"dsv ingest FILE lists every rejected row): {self.refused}"
            )


def folder_entries(tick: _Tick, folder: Path) -> None:
    """Each file of the drop folder, by name: one resolving outside the folder is never read."""
    for path in sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []:
        reason = outside_reason(path, folder)
        if reason is not None:
            tick.never(path.name, reason)
        else:
            tick.entry(path.name, _stat(path), functools.partial(_as_is, path))


def prefix_entries(tick: _Tick, prefix: S3DropPrefix) -> None:
    """Each object directly under the S3 drop prefix, listed a page at a time; a changed one is downloaded into a temporary
    folder (removed once scanned: one object on disk at a time), an unchanged one is not downloaded."""
    for found in prefix.entries():
        if isinstance(found, Refused):
            tick.never(found.name, found.reason)
        else:
            tick.entry(found.name, found.stat, functools.partial(_downloaded, prefix, found.name))


def _as_is(path: Path) -> AbstractContextManager[Path]:
    return nullcontext(path)


@contextmanager
def _downloaded(prefix: S3DropPrefix, name: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="dsv-drop-scan-") as folder:
        yield prefix.download(name, Path(folder))


def build_drop_folder_sensor(jobs: list[Any], sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition) -> dg.SensorDefinition:
    @dg.sensor(
        name="drop_folder_sensor",
        jobs=jobs,
        minimum_interval_seconds=30,
        description="Lands and loads a batch file as soon as it appears (or changes) in the drop folder (or the S3 drop prefix), over every "
        "partition its rows touch. The cursor holds one entry per file now in the drop location (its stat, or an object's size, ETag and "
        "LastModified, and its SHA-256): an unchanged file is not read (an object not downloaded) again.",
    )
    def drop_folder_sensor(context: dg.SensorEvaluationContext, platform: PlatformResource) -> dg.SensorResult:
        tick = _Tick(json.loads(context.cursor) if context.cursor else {}, sources, partitions)
        settings = platform.settings()
        if settings.drop_url is not None:
            prefix_entries(tick, S3DropPrefix(settings.drop_url, endpoint_url=settings.s3_endpoint_url, region=settings.s3_region))
        else:
            folder_entries(tick, settings.drop_folder)
        tick.log(context)
        return dg.SensorResult(run_requests=tick.requests, cursor=json.dumps(tick.seen, sort_keys=True))

    return drop_folder_sensor


def build_automation(sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition) -> Automation:
    """The daily jobs over the partitioned sources; reference tables (no ``partition_by``) have their own unpartitioned job."""
    reference = [s.name for s in sources.values() if not s.partitioned]
    references = dg.AssetSelection.assets(*(key(name) for name in reference for key in (keys.raw, keys.canonical)))
    landing_job = dg.define_asset_job("landing_job", selection=dg.AssetSelection.groups("raw") - references)
    daily_ingest_job = dg.define_asset_job(
        DAILY_JOB,
        selection=dg.AssetSelection.groups("raw", "canonical") - references,
        description="Land a day's batches (the drop-folder files of the day) and load them into the canonical tables.",
    )
    schedule = dg.build_schedule_from_partitioned_job(daily_ingest_job, hour_of_day=3, name="daily_ingest_schedule")
    jobs = [landing_job, daily_ingest_job]
    if reference:
        jobs.append(
            dg.define_asset_job(
                REFERENCE_JOB, selection=references, description="Land the reference tables' drop-folder files (unpartitioned) and load them whole."
            )
        )
    return Automation(jobs, [schedule], [build_drop_folder_sensor(jobs[1:], sources, partitions)])
