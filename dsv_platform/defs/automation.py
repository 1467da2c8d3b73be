"""Jobs, the daily schedule and the drop-folder sensor."""

import hashlib
import json
from pathlib import Path

import dagster as dg

from dsv_platform.defs.partitions import daily_partitions
from dsv_platform.defs.raw import RawBatchConfig
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.domain.batch import parse_batch_file_name
from dsv_platform.domain.sources import SOURCES

landing_job = dg.define_asset_job("landing_job", selection=dg.AssetSelection.groups("raw"))
daily_ingest_job = dg.define_asset_job(
    "daily_ingest_job", selection=dg.AssetSelection.groups("raw", "canonical"), description="Land a day's batches and load them into the canonical tables."
)
daily_ingest_schedule = dg.build_schedule_from_partitioned_job(daily_ingest_job, hour_of_day=3, name="daily_ingest_schedule")


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dg.sensor(job=landing_job, minimum_interval_seconds=30, description="Lands a batch file as soon as it appears (or changes) in the drop folder.")
def drop_folder_sensor(context: dg.SensorEvaluationContext, platform: PlatformResource) -> dg.SensorResult:
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    folder = Path(platform.drop_folder)
    requests, skipped = [], []
    for path in sorted(folder.glob("*.csv")) if folder.is_dir() else []:
        parsed = parse_batch_file_name(path.name)
        digest = _digest(path)
        if seen.get(path.name) == digest:
            continue
        seen[path.name] = digest
        if parsed is None or parsed[0] not in SOURCES or not daily_partitions.has_partition_key(parsed[1].isoformat()):
            skipped.append(path.name)
            continue
        source, day, _ = parsed
        asset = f"raw_{source}"
        requests.append(
            dg.RunRequest(
                run_key=f"{path.name}@{digest}",
                partition_key=day.isoformat(),
                asset_selection=[dg.AssetKey(asset)],
                run_config=dg.RunConfig(ops={asset: RawBatchConfig(drop_files=[path.name])}),
                tags={"dsv/drop_file": path.name, "dsv/digest": digest},
            )
        )
    if skipped:
        context.log.warning(f"not batch files (expected <source>__<YYYY-MM-DD>__<batch id>.csv for a known source and day): {skipped}")
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(seen, sort_keys=True))
