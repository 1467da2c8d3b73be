"""`dsv ingest SOURCE FILE...`: land batch files write-once and load the canonical table, as one recorded Dagster run.

In this process; with ``--submit``, on the production instance (cli/submit.py), whose run workers read the files at the
paths given (a folder they share, e.g. the drop folder): the files are validated here first either way."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from dsv_platform.adapters.iceberg.iceberg_schema import check_evolution
from dsv_platform.adapters.objects.landing import LandingError, check_recorded_time, index_day, scan_days
from dsv_platform.bootstrap import Platform
from dsv_platform.cli.context import with_platform
from dsv_platform.cli.progress import stage_progress
from dsv_platform.cli.runs import Runner, UnknownNameError, check_lines
from dsv_platform.cli.submit import ASSET_JOB, add_submit_argument, partition_tags, submit, webserver
from dsv_platform.core.config.source import SourceSpec, partition_text
from dsv_platform.core.contracts.validation import FailureCase
from dsv_platform.core.errors import ConfigurationError, FailureKind
from dsv_platform.core.ingest.landing_format import EXTENSIONS
from dsv_platform.core.ingest.scan_memo import scan_file
from dsv_platform.core.progress.stages import SILENT, Progress
from dsv_platform.core.trust.trust import Role
from dsv_platform.defs import keys
from dsv_platform.defs.raw import RawBatchConfig, file_batch, recorded_time
from dsv_platform.services.trust import trust

SHOWN = 5
"""Rejected rows printed per file; the rejected-rows file and ``--json`` hold every one."""


class BatchFileError(ConfigurationError):
    """A file given to ``dsv ingest`` is missing, of another format or unreadable."""


@dataclass(frozen=True)
class IngestFile:
    path: Path
    digest: str
    days: tuple[dt.date, ...]
    accepted: int
    rejected: int
    failures: tuple[FailureCase, ...] = ()


def check_file(path: Path, spec: SourceSpec, config: RawBatchConfig, progress: Progress = SILENT) -> IngestFile:
    """Validate one file (exists, the source's format, readable) and find the partition days its rows touch."""
    if not path.is_file():
        raise BatchFileError(f"{path}: no such file")
    ext = EXTENSIONS[spec.landing_format]
    if path.suffix.lstrip(".").lower() != ext:
        raise BatchFileError(f"{path}: source {spec.name!r} lands {spec.landing_format} files (*.{ext})")
    digest, scan = scan_file(path, spec, progress)  # in record batches: memory follows the record batch, not the file; remembered for the run
    if scan.malformed:
        raise BatchFileError(f"{path}: {scan.malformed_reason}")
    _, recorded_at = file_batch(path, config)
    days = tuple(scan_days(scan, index_day(spec, (recorded_at or dt.datetime.now(dt.UTC)).date())))
    failures = scan.failures if scan.rejected else ()
    return IngestFile(path, digest, days, scan.accepted, scan.rejected, failures)


def _config(args: argparse.Namespace, files: list[Path]) -> RawBatchConfig:
    if args.batch_id is not None and len(files) != 1:
        raise ConfigurationError("--batch-id names the batch of one file; give exactly one FILE")
    return RawBatchConfig(files=[str(f) for f in files], batch_id=args.batch_id, recorded_at=args.recorded_at)


def _historical_load(platform: Platform, spec: SourceSpec, claimed: str | None) -> None:
    """``--recorded-at``: an operator's historical load (ACCESS_DENIED naming the identity otherwise); never in the future.

    A future time is refused before anything lands (LandingError, INVALID), the attempt audited; the accepted load is
    audited by the raw asset, naming files and batches.
    """
    try:
        when = recorded_time(claimed)
    except ValueError:
        raise ConfigurationError(f"--recorded-at: not an ISO time: {claimed!r}") from None
    if when is None:
        return
    trust.require(platform, Role.OPERATOR)
    try:
        check_recorded_time(when, f"--recorded-at for {spec.name}")
    except LandingError as exc:
        trust.audit(platform, "ingest.recorded_at", f"source:{spec.name}", detail={"recorded_at": claimed, "refused": str(exc)})
        raise


def _batch_ids(platform: Platform, source: str, item: IngestFile) -> list[str]:
    return sorted({r.batch_id for d in item.days for r in platform.landing.records(source, d) if r.digest == item.digest})


def _file_report(platform: Platform, source: str, item: IngestFile, rejected_file: Path | None) -> dict[str, object]:
    days = [partition_text(d) for d in item.days]
    ids = _batch_ids(platform, source, item)
    doc: dict[str, object] = {"file": str(item.path), "batch_ids": ids, "digest": item.digest, "days": days}
    doc |= {"rows_accepted": item.accepted, "rows_rejected": item.rejected}
    if rejected_file is not None:
        doc |= {"rejected_file": str(rejected_file), "rejected": [f.to_document() for f in item.failures]}
    return doc


def write_rejected(home: Path, source: str, item: IngestFile) -> Path | None:
    """Every contract failure of ``item`` as JSON Lines under ``<home>/rejected/<source>/<file digest>.jsonl``; None when none."""
    if not item.rejected:
        return None
    path = home / "rejected" / source / f"{item.digest}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"file": str(item.path), **f.to_document()}, ensure_ascii=False) for f in item.failures]
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def _failure_line(failure: FailureCase) -> str:
    key = "-" if failure.row_key is None else ", ".join(repr(k) for k in failure.row_key)  # repr: control bytes come out escaped
    return f"key [{key}] column {failure.column or '-'}: {failure.check}, value {failure.value!r}"


@with_platform
def _ingest(args: argparse.Namespace, platform: Platform) -> int:
    config = platform.config
    spec = config.sources.get(args.source)
    if spec is None:
        raise UnknownNameError(f"unknown source {args.source!r}; known: {sorted(config.sources)} (configuration {config.folder})")
    trust.require(platform, Role.SOURCE_WRITER, source=spec.name)  # before anything lands (docs/trust.md)
    _historical_load(platform, spec, args.recorded_at)
    server = webserver(args, platform.settings)  # --submit: a bad URL is refused before anything runs
    changes = check_evolution(platform.tables, spec)  # a contract change the canonical table cannot take is refused before anything lands
    files = [Path(f).resolve() for f in args.files]
    progress = stage_progress()  # stages on stderr: validate here, then the run's landing, load and partitions
    progress.stage("validate")
    items = [check_file(f, spec, _config(args, files), progress) for f in files]
    progress.done()
    landable = [i for i in items if i.accepted]  # a file none of whose rows satisfy the contract lands nothing (all reported)
    days = sorted({d for item in landable for d in item.days})
    start = config.options.partitions_start
    if days and days[0] < start and spec.partitioned:
        raise BatchFileError(f"rows fall on {days[0]}, before the first partition {start} (platform.yaml partitions.start)")
    raw = keys.raw(spec.name)
    run_id, checks = None, []
    if landable:
        run_config = {"ops": {keys.op_name(raw): {"config": _config(args, [i.path for i in landable]).model_dump()}}}
        span = (days[0], days[-1]) if spec.partitioned else None  # a reference table's assets are unpartitioned
        assets = [raw, keys.canonical(spec.name)]
        if server is not None:  # the instance's queue and launcher run it; its workers read the files at these paths
            submitted = submit(server, ASSET_JOB, tags=partition_tags(span), run_config=run_config, assets=[list(k.path) for k in assets])
            run_id, checks = submitted.run_id, submitted.check_lines()
        else:
            runner = Runner.open(platform.settings, config, progress=progress)
            try:
                result = runner.run(assets, days=span, run_config=run_config)
            finally:
                runner.close()
            run_id, checks = result.run_id, check_lines(result)
    rejected_files = {i.path: write_rejected(platform.settings.home, spec.name, i) for i in items}
    rejected = sum(i.rejected for i in items)
    code = FailureKind.ROWS_REJECTED.exit_code if rejected else 0  # accepted rows stay landed (append-only); the caller is told
    if args.json:
        report = [_file_report(platform, spec.name, i, rejected_files[i.path]) for i in items]
        doc = {"run_id": run_id, "source": spec.name, "first_day": partition_text(days[0]) if days else None,
               "last_day": partition_text(days[-1]) if days else None, "files": report,
               "schema_changes": [c.to_document() for c in changes] if run_id else []}  # fmt: skip
        print(json.dumps(doc, indent=2))
        return code
    _print_report(platform, spec.name, items, (run_id, checks), days, rejected_files)
    if changes and run_id is not None:
        print(f"  schema of {platform.tables.identifier(spec)} evolved (audited as schema_evolved): {'; '.join(c.describe() for c in changes)}")
    if rejected:
        where = ", ".join(str(f) for f in rejected_files.values() if f is not None)
        landed = "the accepted rows are landed" if landable else "no file had a row to land"
        print(f"dsv: error: {rejected} row(s) of {spec.name} rejected by its contract; {landed}; see {where}", file=sys.stderr)
    return code


def _print_report(
    platform: Platform, source: str, items: list[IngestFile], run: tuple[str | None, list[str]], days: list[dt.date], rejected_files: dict[Path, Path | None]
) -> None:
    run_id, checks = run
    if run_id is not None:
        landed = sum(1 for i in items if i.accepted)
        span = f"{partition_text(days[0])}..{partition_text(days[-1])}"
        print(f"ingested {landed} file(s) of {source} in run {run_id} (raw/{source}, canonical/{source} over {span})")
    for i in items:
        print(f"  {i.path}\n    batch {', '.join(_batch_ids(platform, source, i)) or '(not landed: no row satisfies the contract)'}  sha256 {i.digest}")
        print(f"    days {', '.join(partition_text(d) for d in i.days) if i.accepted else '-'}  rows accepted {i.accepted}, rejected {i.rejected}")
    for line in checks:
        print(f"  check {line}")
    for i in items:
        if i.rejected:
            shown = i.failures[:SHOWN]
            print(f"  rejected rows of {i.path.name} (first {len(shown)} of {len(i.failures)} failures):")
            for failure in shown:
                print(f"    {_failure_line(failure)}")
            print(f"    every rejected row: {rejected_files[i.path]}")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ingest", help="land batch files of a source and load its canonical table (one Dagster run)")
    p.add_argument("source", metavar="SOURCE", help="a source of the configuration (DSV_CONFIG_DIR)")
    p.add_argument("files", metavar="FILE", nargs="+", help="batch files in the source's landing format")
    p.add_argument("--batch-id", metavar="ID", help="the batch id (one file only; default: the file name)")
    p.add_argument(
        "--recorded-at",
        metavar="ISO",
        help="a historical load: when the batch was recorded (operator, audited, never in the future); default: the platform clock at landing",
    )
    p.add_argument("--json", action="store_true", help="one JSON object: run_id, source, first_day, last_day, files")
    add_submit_argument(p)
    p.set_defaults(handler=_ingest)
