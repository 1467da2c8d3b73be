"""Run inside the restored environment: ``python -m dsv_platform.services.reproduction.reproduce_runner REQUEST.json``.

Imports the recorded producer (``module:ATTRIBUTE``) or trainer from the worktree, reads the tables the
auditor exported (Arrow IPC files), runs ``compute`` (or training) with the recorded parameters and seed
under the pinned TZ, and prints one JSON line: the results, the tz rules it loaded, its python and packages.

Details: docs/reproducing-artifacts.md
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc


def load_producer(path: str) -> Any:
    """The object at ``module:ATTRIBUTE`` (attribute may be dotted)."""
    module_name, _, attribute = path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


def read_table(path: str) -> pa.Table:
    with pa.memory_map(path) as source:
        return pyarrow.ipc.open_file(source).read_all()


def tz_rules(recorded: dict[str, Any]) -> dict[str, Any]:
    """The tz rules loaded here for the recorded zones, and how they differ from the recorded ones."""
    try:
        from dsv_platform.core.config import timezones
    except ImportError as exc:
        return {"tz_database": None, "differences": [f"this code has no dsv_platform.core.config.timezones: {exc}"]}
    zones = sorted((recorded.get("zones") or {}).keys())
    return {"tz_database": timezones.tz_database(zones), "differences": timezones.check_tz_database(recorded)}


def train(request: dict[str, Any]) -> dict[str, Any]:
    """A model run's training rerun: the recorded trainer on the exported splits, seed and parameters."""
    from dsv_platform.core.reproduction.model_run import TrainingData

    data = TrainingData(read_table(request["train"]), read_table(request["validation"]), int(request["seed"]), request["parameters"], bool(request["smoke"]))
    model = load_producer(request["trainer"])(data)
    return {"weights_hash": model.weights_hash, "metrics": dict(model.metrics), "finite": bool(model.finite)}


def compute(request: dict[str, Any]) -> dict[str, Any]:
    """An artifact's rerun: the recorded producer's ``compute`` on the exported inputs, and the tz rules it loaded."""
    producer = load_producer(request["producer"])
    inputs = {name: read_table(path) for name, path in request["inputs"].items()}
    results = producer.compute(inputs, request["parameters"], int(request["seed"]))
    return {"results": results, **tz_rules(request.get("tz_database") or {})}


def run(request: dict[str, Any]) -> dict[str, Any]:
    packages = {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
    done = train(request) if "trainer" in request else compute(request)
    return {
        **done,
        "timezone": time.tzname[0],
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": dict(sorted(packages.items())),
    }


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[0]).read_text())
    print(json.dumps(run(request), sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
