"""The image's platform.yaml against dagster-k8s's own executor schema, without a cluster (issues 12 and 26).

The executor settings (``executor: {name: k8s, config}`` in deploy/helm/config/executor.yaml, added to the user's
platform.yaml by deploy/add_executor.py) are checked against ``k8s_job_executor``'s schema and must reach the
Definitions; a misspelled key fails. deploy/helm/values.yaml is checked against the chart's own schema in
test_helm_values.py.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._config import process_config, resolve_to_config_type
from dagster_k8s import k8s_job_executor

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.platform_options import load_options
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
IMAGE_CONFIG = ROOT / "deploy" / "helm" / "config"


def _deploy_script(name: str) -> Any:
    """A script of deploy/ (scripts, not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "deploy" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


add_executor = _deploy_script("add_executor").add_executor


def validate(schema: Any, config: dict[str, Any]) -> Any:
    result = process_config(resolve_to_config_type(schema), config)
    assert result.success, [e.message for e in result.errors or []]
    return result.value


def fails(schema: Any, config: dict[str, Any]) -> list[str]:
    result = process_config(resolve_to_config_type(schema), config)
    assert not result.success
    return [e.message for e in result.errors or []]


def test_image_platform_yaml_selects_a_valid_k8s_job_executor(tmp_path):
    # The image's configuration folder as deploy/Dockerfile assembles it: the user's folder, the executor added.
    folder = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, folder)
    before = (folder / "platform.yaml").read_text()
    assert add_executor(folder, IMAGE_CONFIG / "executor.yaml") == "added"
    assert (folder / "platform.yaml").read_text().startswith(before), "the user's platform.yaml is kept as written"
    options = load_options(folder)
    assert options.executor == "k8s" and options.executor_config
    assert options.partitions_start == load_options(CONFIG_DIR).partitions_start and options.dagster_modules == load_options(CONFIG_DIR).dagster_modules
    validate(k8s_job_executor.config_schema.config_type, options.executor_config)
    assert fails(k8s_job_executor.config_schema.config_type, {**options.executor_config, "step_k8s_confg": {}})
    # the Definitions run every job on k8s_job_executor
    defs = build_defs(load_settings({"DSV_HOME": str(tmp_path / "dsv"), "DSV_CONFIG_DIR": str(folder)}), load_config(folder))
    for job in ("daily_ingest_job", "publish_fraud_training_set_v6"):
        executor = defs.resolve_job_def(job).executor_def
        assert executor.name == "k8s" and executor.executor_creation_fn is k8s_job_executor.executor_creation_fn
        resolved = executor.config_schema.resolve_config({})  # what a run gets: platform.yaml's config over the schema's defaults
        assert resolved.success and resolved.value["config"]["max_concurrent"] == options.executor_config["max_concurrent"]
        assert isinstance(executor, dg.ExecutorDefinition)


def test_a_users_platform_yaml_keeps_its_own_executor_and_a_folder_without_one_gets_only_the_executor(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "platform.yaml").write_text('partitions: {start: "2025-01-01"}\nexecutor: in_process\n')
    assert add_executor(mine, IMAGE_CONFIG / "executor.yaml") == "kept"
    assert (mine / "platform.yaml").read_text() == 'partitions: {start: "2025-01-01"}\nexecutor: in_process\n'
    bare = tmp_path / "bare"
    bare.mkdir()
    assert add_executor(bare, IMAGE_CONFIG / "executor.yaml") == "created"
    assert load_options(bare).executor == "k8s" and load_options(bare).partitions_start == load_options(tmp_path / "nowhere").partitions_start
