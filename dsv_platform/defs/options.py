"""The platform-wide options of a configuration (``platform.yaml``): partition start, extra Dagster modules, the demo."""

from __future__ import annotations

import datetime as dt
import importlib
from collections.abc import Callable
from typing import Any, cast

import dagster as dg

from dsv_platform.core.config.platform_config import PlatformConfig
from dsv_platform.core.config.platform_options import PLATFORM_FILE
from dsv_platform.core.config_yaml import ConfigError


def partitions_start(config: PlatformConfig) -> dt.date:
    return config.options.partitions_start


def dagster_modules(config: PlatformConfig) -> tuple[str, ...]:
    return config.options.dagster_modules


def demo_module(config: PlatformConfig) -> str | None:
    return config.options.demo


def module_function(config: PlatformConfig, module: str, function: str, *, key: str) -> Callable[..., Any]:
    """``module.function`` as the configuration names it; a failure is one line naming platform.yaml, the key and the module."""
    file = config.folder / PLATFORM_FILE
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"cannot import {module!r}: {exc}", file=file, key=key) from exc
    fn = getattr(found, function, None)
    if not callable(fn):
        raise ConfigError(f"module {module!r} exposes no {function}()", file=file, key=key)
    return cast(Callable[..., Any], fn)


def extra_definitions(config: PlatformConfig) -> list[dg.Definitions]:
    """The ``definitions(config)`` of every module in ``dagster_modules``."""
    found = []
    for module in dagster_modules(config):
        defs = module_function(config, module, "definitions", key="dagster_modules")(config)
        if not isinstance(defs, dg.Definitions):
            message = f"{module}.definitions(config) returned {type(defs).__name__}, not dagster.Definitions"
            raise ConfigError(message, file=config.folder / PLATFORM_FILE, key="dagster_modules")
        found.append(defs)
    return found
