"""Jobs, the daily schedule and the drop-folder sensor, over whatever sources the configuration names."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from dsv_platform.core.config.source import SourceSpec
from dsv_platform.core.ingest.batch import parse_batch_file
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


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def drop_request(path: Path, digest: str, sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition) -> dg.RunRequest | None:
    """The run landing and loading one drop-folder file, or None if it is not a batch file of a known source, format and day."""
    parsed = parse_batch_file(path.name)
    if parsed is None or parsed.source not in sources or sources[parsed.source].landing_format != parsed.format:
        return None
    partitioned = sources[parsed.source].partitioned  # a reference table's file lands whatever its day, in REFERENCE_JOB
    if partitioned and not partitions.has_partition_key(parsed.day.isoformat()):
        return None
    raw = f"raw_{parsed.source}"
    return dg.RunRequest(
        run_key=f"{path.name}@{digest}",
        partition_key=parsed.day.isoformat() if partitioned else None,
        job_name=DAILY_JOB if partitioned else REFERENCE_JOB,
        asset_selection=[dg.AssetKey(raw), dg.AssetKey(f"canonical_{parsed.source}")],
        run_config=dg.RunConfig(ops={raw: RawBatchConfig(files=[path.name])}),
        tags={"dsv/drop_file": path.name, "dsv/digest": digest},
    )


def build_drop_folder_sensor(jobs: list[Any], sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition) -> dg.SensorDefinition:
    @dg.sensor(
        name="drop_folder_sensor",
        jobs=jobs,
        minimum_interval_seconds=30,
        description="Lands and loads a batch file as soon as it appears (or changes) in the drop folder.",
    )
    def drop_folder_sensor(context: dg.SensorEvaluationContext, platform: PlatformResource) -> dg.SensorResult:
        seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        folder = platform.settings().drop_folder
        requests, skipped = [], []
        outside = []
        for path in sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []:
            reason = outside_reason(path, folder)
            if reason is not None:
                if seen.get(path.name) != reason:  # logged once per target, not every tick
                    outside.append(reason)
                    seen[path.name] = reason
                continue
            digest = _digest(path)
            if seen.get(path.name) == digest:
                continue
            seen[path.name] = digest
            request = drop_request(path, digest, sources, partitions)
            if request is None:
                skipped.append(path.name)
            else:
                requests.append(request)
        for reason in outside:
            context.log.warning(f"skipped, never landed: {reason}")
        if skipped:
            context.log.warning(f"not batch files (expected <source>__<YYYY-MM-DD>__<batch id>.<the source's format> for a known source and day): {skipped}")
        return dg.SensorResult(run_requests=requests, cursor=json.dumps(seen, sort_keys=True))

    return drop_folder_sensor


def build_automation(sources: Mapping[str, SourceSpec], partitions: dg.PartitionsDefinition) -> Automation:
    """The daily jobs over the partitioned sources; reference tables (no ``partition_by``) have their own unpartitioned job."""
    reference = [s.name for s in sources.values() if not s.partitioned]
    keys = dg.AssetSelection.assets(*(f"{kind}_{name}" for name in reference for kind in ("raw", "canonical")))
    landing_job = dg.define_asset_job("landing_job", selection=dg.AssetSelection.groups("raw") - keys)
    daily_ingest_job = dg.define_asset_job(
        DAILY_JOB,
        selection=dg.AssetSelection.groups("raw", "canonical") - keys,
        description="Land a day's batches (the drop-folder files of the day) and load them into the canonical tables.",
    )
    schedule = dg.build_schedule_from_partitioned_job(daily_ingest_job, hour_of_day=3, name="daily_ingest_schedule")
    jobs = [landing_job, daily_ingest_job]
    if reference:
        jobs.append(
            dg.define_asset_job(
                REFERENCE_JOB, selection=keys, description="Land the reference tables' drop-folder files (unpartitioned) and load them whole."
            )
        )
    return Automation(jobs, [schedule], [build_drop_folder_sensor(jobs[1:], sources, partitions)])
