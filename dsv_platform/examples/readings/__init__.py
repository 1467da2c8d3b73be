"""The readings example: electricity meter readings as configuration, a generator and a quarterly report.

``config/`` is a configuration folder (sources, the readings_hourly dataset, options); point
``DSV_CONFIG_DIR`` at it (with its own ``DSV_HOME``). No platform module imports this package.
"""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent / "config"
DATASET = "readings_hourly:v1"
