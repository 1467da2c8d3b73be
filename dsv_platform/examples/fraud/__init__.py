"""The fraud example: card transactions, chargebacks and account features as configuration.

``config/`` is a configuration folder (sources, datasets, labels); the label
versions are the Python functions in :mod:`dsv_platform.examples.fraud.labels`.
"""

from pathlib import Path

CONFIG_DIR = Path(__file__).resolve().parent / "config"
