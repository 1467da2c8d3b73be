"""``executor`` in platform.yaml: checked at load time (one line naming the key), and the executor every job of the Definitions gets."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from dagster._core.system_config.objects import ResolvedRunConfig

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.platform_options import EXECUTORS, parse_options
from dsv_platform.core.config_yaml import ConfigError
from dsv_platform.defs import build_defs
from dsv_platform.defs.executor import FORKSERVER
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.settings import load_settings

FILE = Path("platform.yaml")


@pytest.mark.parametrize(
    ("doc", "key"),
    [
        ({"executor": "celeri"}, "executor"),
        ({"executor": {"name": "spark"}}, "executor.name"),
        ({"executor": {"config": {}}}, "executor.name"),
        ({"executor": {"name": "celery", "brokr": "redis://"}}, "executor.brokr"),
        ({"executor": {"name": "k8s", "config": ["max_concurrent"]}}, "executor.config"),
        ({"executor": 3}, "executor"),
    ],
)
def test_a_wrong_executor_is_one_line_naming_the_key(doc, key):
    with pytest.raises(ConfigError) as err:
        parse_options(doc, file=FILE)
    assert err.value.key == key and "\n" not in str(err.value)


def test_executor_forms():
    assert parse_options({}, file=FILE).executor is None
    assert [parse_options({"executor": name}, file=FILE).executor for name in EXECUTORS] == list(EXECUTORS)
    options = parse_options({"executor": {"name": "celery", "config": {"broker": "redis://h:1/0"}}}, file=FILE)
    assert (options.executor, options.executor_config) == ("celery", {"broker": "redis://h:1/0"})


def _defs(tmp_path: Path, executor_line: str | None):
    folder = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, folder)
    if executor_line is not None:
        with (folder / "platform.yaml").open("a") as f:
            f.write(executor_line + "\n")
    return build_defs(load_settings({"DSV_HOME": str(tmp_path / "dsv"), "DSV_CONFIG_DIR": str(folder)}), load_config(folder))


def test_the_definitions_run_every_job_on_the_configured_executor(tmp_path, monkeypatch):
    default = _defs(tmp_path / "default", None).resolve_job_def("daily_ingest_job").executor_def.name
    assert default == "multi_or_in_process_executor"
    celery = _defs(tmp_path / "celery", "executor: celery")
    for job in ("daily_ingest_job", "publish_fraud_training_set_v6", "gc_plan_job"):
        executor = celery.resolve_job_def(job).executor_def
        assert executor.name == "celery"
    schema = celery.resolve_job_def("daily_ingest_job").executor_def.config_schema
    monkeypatch.delenv("DSV_CELERY_BROKER_URL", raising=False)
    unset = schema.resolve_config({})
    assert not unset.success and "DSV_CELERY_BROKER_URL" in str(unset.errors)
    monkeypatch.setenv("DSV_CELERY_BROKER_URL", "redis://broker.example:6379/0")
    monkeypatch.setenv("DSV_CELERY_BACKEND_URL", "redis://broker.example:6379/1")
    resolved = schema.resolve_config({})  # read when a run starts, not when the Definitions load
    assert resolved.success and resolved.value["config"]["broker"] == "redis://broker.example:6379/0"
    assert resolved.value["config"]["backend"] == "redis://broker.example:6379/1"
    assert _defs(tmp_path / "inproc", "executor: in_process").resolve_job_def("daily_ingest_job").executor_def.name == "in_process"


@pytest.mark.parametrize(
    ("line", "word"),
    [("executor: {name: k8s, config: {max_concurent: 2}}", "max_concurent"), ("executor: {name: celery, config: {broker: 3}}", "broker")],
)
def test_an_executor_config_its_schema_refuses_fails_when_the_definitions_load(tmp_path, line, word):
    with pytest.raises(ConfigError) as err:
        _defs(tmp_path, line)
    assert err.value.key == "executor.config" and word in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"broker": "redis://:S3CRET@redis:6379/0"}, "executor.config.broker"),
        ({"broker": {"env": "DSV_CELERY_BROKER_URL"}, "backend": "redis://dsv:S3CRET@redis:6379/1"}, "executor.config.backend"),
        ({"config_source": {"broker_transport_options": {"password": "S3CRET"}}}, "executor.config.config_source.broker_transport_options.password"),
    ],
)
def test_a_credential_written_in_the_executor_config_is_refused_naming_the_key(config, key):
    """Issue 26 item 3: platform.yaml is committed and baked into the image; a credential comes from the environment."""
    with pytest.raises(ConfigError) as err:
        parse_options({"executor": {"name": "celery", "config": config}}, file=FILE)
    assert err.value.key == key and "{env: VARIABLE}" in str(err.value) and "S3CRET" not in str(err.value)


def test_environment_variables_and_kubernetes_secret_names_are_not_credentials():
    celery = {"broker": {"env": "DSV_CELERY_BROKER_URL"}, "backend": "redis://redis:6379/1"}
    assert parse_options({"executor": {"name": "celery", "config": celery}}, file=FILE).executor_config == celery
    k8s = {"step_k8s_config": {"pod_spec_config": {"image_pull_secrets": [{"name": "registry-login"}]}}, "env_secrets": ["dsv-platform-s3"]}
    assert parse_options({"executor": {"name": "k8s", "config": k8s}}, file=FILE).executor_config == k8s


def _engine_config(defs, run_config: dict) -> dict:
    return dict(ResolvedRunConfig.build(defs.resolve_job_def("daily_ingest_job"), run_config).execution.execution_engine_config)


def test_launched_steps_fork_from_a_server_holding_the_platform_unless_a_config_names_the_start_method(tmp_path):
    """Spawned, every step of a launched run imported Dagster and the platform again (seconds a step); forked, none does."""
    forked = FORKSERVER["start_method"]
    assert forked == {"forkserver": {"preload_modules": ["dsv_platform.defs.preload"]}}
    default = _defs(tmp_path / "default", None)
    assert _engine_config(default, {})["multiprocess"]["start_method"] == forked
    chosen = _engine_config(default, {"execution": {"config": {"multiprocess": {"max_concurrent": 2}}}})["multiprocess"]
    assert (chosen["max_concurrent"], chosen["start_method"]) == (2, forked)  # the run config keeps the rest of its say
    spawn = {"execution": {"config": {"multiprocess": {"start_method": {"spawn": {}}}}}}
    assert _engine_config(default, spawn)["multiprocess"]["start_method"] == {"spawn": {}}
    assert "multiprocess" not in _engine_config(default, {"execution": {"config": {"in_process": {}}}})
    named = _defs(tmp_path / "named", "executor: multiprocess")
    assert _engine_config(named, {})["start_method"] == forked
    assert _engine_config(named, {"execution": {"config": {"start_method": {"spawn": {}}}}})["start_method"] == {"spawn": {}}
    limited = _defs(tmp_path / "limited", "executor: {name: multiprocess, config: {max_concurrent: 3}}")
    fixed = _engine_config(limited, {})  # platform.yaml's config fixes the executor's; the start method is still added
    assert (fixed["max_concurrent"], fixed["start_method"]) == (3, forked)
    kept = _defs(tmp_path / "kept", "executor: {name: multiprocess, config: {start_method: {spawn: {}}}}")
    assert _engine_config(kept, {})["start_method"] == {"spawn": {}}


def test_without_a_fork_server_steps_are_spawned_as_dagster_does(tmp_path, monkeypatch):
    monkeypatch.setattr("multiprocessing.get_all_start_methods", lambda: ["spawn"])  # Windows has no fork server
    for folder, line in (("default", None), ("named", "executor: multiprocess"), ("limited", "executor: {name: multiprocess, config: {max_concurrent: 3}}")):
        engine = _engine_config(_defs(tmp_path / folder, line), {})
        assert "start_method" not in engine.get("multiprocess", engine), (folder, engine)


def test_the_fork_server_preload_holds_the_code_location_and_the_instance_storage(tmp_path):
    wanted = ("dsv_platform.definitions", "dagster._core.storage.sqlite_storage", "pyiceberg.catalog.sql")
    probe = f"import sys, dsv_platform.defs.preload; print(sorted(m for m in {wanted!r} if m in sys.modules))"
    env = {"DSV_HOME": str(tmp_path / "dsv"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[0] == str(sorted(wanted))
