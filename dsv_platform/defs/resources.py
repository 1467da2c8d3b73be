"""Dagster resources: one PlatformResource bound to the deployment's Settings (the same value in the embedded default and in production).

The resource builds one :class:`~dsv_platform.bootstrap.Platform` per
execution (``setup_for_execution``) and closes it afterwards, so assets share
one registry engine and the same key store the CLI uses.
"""

from dataclasses import replace
from typing import Any, ClassVar, cast

import dagster as dg
from pydantic import PrivateAttr

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.core.errors import ConfigurationError
from dsv_platform.core.progress.stages import Progress, StageLines, fan_out
from dsv_platform.services.trust.launch import verify_launch
from dsv_platform.services.trust.trust import adopt_launch, ensure_service_identity
from dsv_platform.settings import Settings

SERVICE_IDENTITY = "dagster"
"""The Dagster resource's default service identity (docs/trust.md)."""


class PlatformResource(dg.ConfigurableResource[Any]):
    """Registry, object store (with its key store), landing zone, canonical tables and configuration, from the deployment's Settings.

    The resource has no config field: who the service is (identity, key folder, strictness) and where its state
    lives (home, registry URL, credentials) come from the deployment only, never from run config (the Launchpad,
    GraphQL or ``dagster job launch`` can change none of them), and no setting reaches the resource snapshot the
    webserver shows. :meth:`for_settings` binds one Settings value to a subclass, which Dagster keeps when it
    rebuilds the resource for a run; a run worker rebuilds it from its own environment (``definitions.py``).
    """

    deployment: ClassVar[Settings | None] = None
    """The Settings this resource class was bound to by :meth:`for_settings` (the whole value: no setting can be forgotten)."""

    reporter: ClassVar[Progress | None] = None
    """Where the command that runs the assets in process draws their progress (``dsv build`` and ``dsv ingest``: stderr); None: the run log only."""

    _platform: Platform | None = PrivateAttr(default=None)
    _run: Any = PrivateAttr(default=None)  # the DagsterRun this execution belongs to: its tags carry the launch request

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._run = context.run

    @classmethod
    def for_settings(cls, settings: Settings, *, progress: Progress | None = None) -> "PlatformResource":
        """A resource bound to ``settings``; runs a command starts act as its DSV_IDENTITY, else as the service identity.

        ``progress``: the starting command's reporter, told every stage of the assets it runs (in process).
        """
        bound = replace(settings, identity=settings.identity or SERVICE_IDENTITY)
        attrs = {"deployment": bound, "reporter": progress, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        return cast("PlatformResource", type(cls.__name__, (cls,), attrs)())

    def progress(self, context: dg.AssetExecutionContext | dg.OpExecutionContext, prefix: str = "") -> Progress:
        """The asset's stages as ``context.log.info`` lines (the run's event log, the UI's run view), and to the command's reporter."""
        return fan_out(StageLines(context.log.info, prefix=prefix, starts=True), self.reporter)

    def settings(self) -> Settings:
        if self.deployment is None:
            raise ConfigurationError("PlatformResource has no deployment settings: build it with PlatformResource.for_settings(settings)")
        return self.deployment

    def get(self) -> Platform:
        """This execution's Platform (built on first use, closed by ``teardown_after_execution``)."""
        if self._platform is None or self._platform.closed:
            self._platform = build_platform(self.settings())
            ensure_service_identity(self._platform, default=SERVICE_IDENTITY)
            if self._run is not None:  # who launched the run, proven by a signed launch request, is the builder (docs/trust.md)
                run = self._run
                adopt_launch(self._platform, verify_launch(self._platform, run.tags, job=run.job_name, run_id=run.run_id))
        return self._platform

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._platform is not None:
            self._platform.close()
            self._platform = None


def build_resources(settings: Settings, *, progress: Progress | None = None) -> dict[str, dg.ConfigurableResource[Any]]:
    """Every resource, keyed as the assets expect, from one Settings value (``progress``: the starting command's reporter)."""
    return {"platform": PlatformResource.for_settings(settings, progress=progress)}
