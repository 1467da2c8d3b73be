"""The Dagster entry point (``workspace.yaml``, ``dagster dev``): Definitions over the Settings of this process."""

from dsv_platform.defs import build_defs
from dsv_platform.settings import load_settings

defs = build_defs(load_settings())
