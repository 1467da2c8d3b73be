"""One Platform per command: the handlers that touch stores open it once, here, and close it on return."""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable

from dsv_platform.bootstrap import Platform, build_platform
from dsv_platform.settings import load_settings

Handler = Callable[[argparse.Namespace, Platform], int]


def open_platform() -> Platform:
    """The platform the ``DSV_*`` environment names (use as a context manager)."""
    return build_platform(load_settings())


def with_platform(handler: Handler) -> Callable[[argparse.Namespace], int]:
    """Adapt ``handler(args, platform)`` to the ``handler(args)`` the parser calls, opening and closing the platform."""

    @functools.wraps(handler)
    def run(args: argparse.Namespace) -> int:
        with open_platform() as platform:
            return handler(args, platform)

    return run


__all__ = ["open_platform", "with_platform"]
