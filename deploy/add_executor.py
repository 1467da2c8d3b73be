"""Give a configuration folder's platform.yaml the image's executor, keeping everything else the user wrote.

    python deploy/add_executor.py CONFIG_DIR EXECUTOR_YAML

EXECUTOR_YAML holds one top-level ``executor:`` key (deploy/helm/config/executor.yaml: the Kubernetes job
executor and its step limits). A platform.yaml that already names an executor is left as it is; one without is
appended the executor block, byte for byte; a folder without platform.yaml gets one holding only the executor.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def add_executor(config_dir: Path, executor_file: Path) -> str:
    """What was done: ``kept`` (the user's executor), ``added`` or ``created``."""
    block = executor_file.read_text(encoding="utf-8")
    if set(yaml.safe_load(block) or {}) != {"executor"}:
        raise SystemExit(f"{executor_file}: must hold exactly one top-level key, executor")
    target = config_dir / "platform.yaml"
    if not target.exists():
        target.write_text(block, encoding="utf-8")
        return "created"
    text = target.read_text(encoding="utf-8")
    if "executor" in (yaml.safe_load(text) or {}):
        return "kept"
    target.write_text(text + ("" if text.endswith("\n") or not text else "\n") + block, encoding="utf-8")
    return "added"


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(f"platform.yaml executor: {add_executor(Path(sys.argv[1]), Path(sys.argv[2]))}")
