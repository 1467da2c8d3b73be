"""The executor every job runs its steps with, as ``platform.yaml`` ``executor`` names it (docs/scaling-out.md).

``celery`` takes its broker and result backend from the ``DSV_CELERY_BROKER_URL`` and
``DSV_CELERY_BACKEND_URL`` variables (read by Dagster when a run starts) unless ``config``
sets them; ``k8s`` runs each step in its own Kubernetes Job with the K8sRunLauncher's settings.
The celery and k8s executors come from the ``deploy`` extra.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster._config import validate_config

from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.platform_options import PLATFORM_FILE
from dsv_platform.core.config_yaml import ConfigError

CELERY_DEFAULTS: dict[str, Any] = {"broker": {"env": "DSV_CELERY_BROKER_URL"}, "backend": {"env": "DSV_CELERY_BACKEND_URL"}}


def _definition(name: str) -> tuple[dg.ExecutorDefinition, dict[str, Any]]:
    if name == "celery":
        from dagster_celery import celery_executor

        return celery_executor, CELERY_DEFAULTS
    if name == "k8s":
        from dagster_k8s import k8s_job_executor

        return k8s_job_executor, {}
    return (dg.in_process_executor if name == "in_process" else dg.multiprocess_executor), {}


def build_executor(config: PlatformConfig) -> dg.ExecutorDefinition | None:
    """The configured executor (None: Dagster's default); a config the executor's schema refuses is a one-line ConfigError."""
    name = config.options.executor
    if name is None:
        return None
    executor, defaults = _definition(name)
    settings = {**defaults, **(config.options.executor_config or {})}
    checked = validate_config(executor.config_schema.config_type, settings)  # names and types; variables are read when a run starts
    if not checked.success:
        reason = (checked.errors[0].message if checked.errors else "invalid").split(". Expected")[0]
        raise ConfigError(f"not a valid {name} executor config: {reason}", file=config.folder / PLATFORM_FILE, key="executor.config")
    return executor.configured(settings, name=name) if settings else executor
