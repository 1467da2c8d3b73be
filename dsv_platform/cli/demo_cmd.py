"""`dsv demo [ARGS...]`: run the demo module the configuration names (``platform.yaml`` ``demo:``).

The packaged fraud example's demo is :mod:`dsv_platform.examples.fraud.demo`;
``ARGS`` go to its ``main(argv)`` (e.g. ``--days 5 --rows-per-day 120``).
"""

from __future__ import annotations

import argparse

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.platform_options import PLATFORM_FILE
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.defs.options import module_function
from dsv_platform.settings import load_settings


def _demo(args: argparse.Namespace) -> int:
    config = load_config(load_settings().config_dir)
    if config.options.demo is None:
        raise ConfigError("names no demo module (key 'demo'), so there is no demo to run", file=config.folder / PLATFORM_FILE)
    main = module_function(config, config.options.demo, "main", key="demo")
    return int(main(list(args.extra)) or 0)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="run the configuration's demo (the fraud example: --days N --rows-per-day N)",
        description="Runs the demo module named by platform.yaml (key 'demo'); further arguments are passed to it.",
    )
    p.set_defaults(handler=_demo, passthrough=True)
