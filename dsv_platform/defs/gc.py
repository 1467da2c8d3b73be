"""gc_plan_job: the daily reachability GC plan, its figures as metadata; apply only when configured."""


import dagster as dg

from dsv_platform.core.retention.gc import plan_gc
from dsv_platform.defs.resources import PlatformResource
from dsv_platform.services.retention import gc as gc_adapter
from dsv_platform.services.trust.trust import gatekeeper


class GcConfig(dg.Config):
    apply: bool = False  # applying stays a deliberate act
    safety_window_hours: float | None = None  # None: the configuration's policy (platform.yaml gc:, default 24 h)


@dg.op(out=dg.Out(dict, description="The GC plan's figures (kept / collectable per kind, bytes, roots)."))
def gc_plan(context: dg.OpExecutionContext, config: GcConfig, platform: PlatformResource) -> dg.Output[dict[str, object]]:
    """Plan garbage collection from the retention roots; apply it only when ``apply`` is configured."""
    p = platform.get()
    policy = p.config.options.gc.with_hours(config.safety_window_hours)
    reg, store, tables = p.registry, p.store, p.tables
    inv = gc_adapter.collect_inventory(reg, store, tables=tables, landing=p.landing, policy=policy)
    plan = plan_gc(inv, policy)
    figures = plan.figures()
    metadata: dict[str, dg.MetadataValue] = {k: dg.MetadataValue.int(v) if isinstance(v, int) else dg.MetadataValue.text(str(v)) for k, v in figures.items()}
    metadata["dangling_roots"] = dg.MetadataValue.json(plan.dangling_roots)
    if config.apply:
        report = gc_adapter.apply_plan(plan, registry=reg, store=store, tables=tables, dry_run=False, actor=p.actor, gate=gatekeeper(p))
        metadata["applied"] = dg.MetadataValue.text(report.summary())
    return dg.Output(figures, metadata=metadata)


@dg.job(description="Plan reachability garbage collection (dry run unless configured with apply: true).")
def gc_plan_job() -> None:
    gc_plan()


gc_plan_schedule = dg.ScheduleDefinition(
    job=gc_plan_job, cron_schedule="30 3 * * *", execution_timezone="UTC", description="Plan GC daily (never applies unless configured)."
)
