"""The executor every job runs its steps with, as ``platform.yaml`` ``executor`` names it (docs/scaling-out.md).

``celery`` reads its broker and result backend from ``DSV_CELERY_BROKER_URL`` and ``DSV_CELERY_BACKEND_URL``
when a run starts unless ``config`` sets them; ``k8s`` runs each step in its own Kubernetes Job (both from the
``deploy`` extra). Left out, or named ``multiprocess``, steps are forked from a server that imported the platform
once (``forkserver``, preloading :mod:`dsv_platform.defs.preload`), not spawned: a step starts with Dagster and
the platform loaded. A ``start_method`` in the run config or in ``platform.yaml``'s executor config still wins.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

import dagster as dg
from dagster._config import validate_config

from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.platform_options import PLATFORM_FILE
from dsv_platform.core.config_yaml import ConfigError

CELERY_DEFAULTS: dict[str, Any] = {"broker": {"env": "DSV_CELERY_BROKER_URL"}, "backend": {"env": "DSV_CELERY_BACKEND_URL"}}
FORKSERVER: dict[str, Any] = {"start_method": {"forkserver": {"preload_modules": ["dsv_platform.defs.preload"]}}}
"""The multiprocess start method unless a config names one: steps forked from a server that imported the code location
and what a step needs (named: given ``forkserver`` without ``preload_modules``, Dagster preloads only its executor)."""


def _forked(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the fork server unless it names a start method, or the system has none (Windows: spawned, as before)."""
    return {**FORKSERVER, **config} if "forkserver" in multiprocessing.get_all_start_methods() else config


def _forked_default(config: dict[str, Any]) -> dict[str, Any]:
    return {"multiprocess": _forked(config["multiprocess"] or {})} if "multiprocess" in config else config


def _with_forked_steps(executor: dg.ExecutorDefinition, fill: Callable[[dict[str, Any]], dict[str, Any]]) -> dg.ExecutorDefinition:
    """``executor`` under its own name, taking the same run config, with ``fill`` adding the start method it leaves out."""
    return executor.configured(fill, name=executor.name, config_schema=executor.config_schema.as_field())


def _definition(name: str) -> tuple[dg.ExecutorDefinition, dict[str, Any]]:
    if name == "celery":
        from dagster_celery import celery_executor

        return celery_executor, CELERY_DEFAULTS
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor, {}
    return (dg.in_process_executor, {}) if name == "in_process" else (dg.multiprocess_executor, _forked({}))


def build_executor(config: PlatformConfig) -> dg.ExecutorDefinition:
    """The configured executor (none named: Dagster's default); a config the executor's schema refuses is a one-line ConfigError."""
    name = config.options.executor
    if name is None:
        return _with_forked_steps(dg.multi_or_in_process_executor, _forked_default)
    if name == "multiprocess" and not config.options.executor_config:
        return _with_forked_steps(dg.multiprocess_executor, _forked)
    executor, defaults = _definition(name)
    settings = {**defaults, **(config.options.executor_config or {})}
    checked = validate_config(executor.config_schema.config_type, settings)  # names and types; variables are read when a run starts
    if not checked.success:
        reason = (checked.errors[0].message if checked.errors else "invalid").split(". Expected")[0]
        raise ConfigError(f"not a valid {name} executor config: {reason}", file=config.folder / PLATFORM_FILE, key="executor.config")
    return executor.configured(settings, name=name) if settings else executor
