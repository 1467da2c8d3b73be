"""deploy/helm/values.yaml and the image's platform.yaml against dagster-k8s's own config schemas, without a cluster (issue 12).

The official chart turns ``runLauncher.config.k8sRunLauncher`` and ``dagsterDaemon.runCoordinator`` into the
instance's ``dagster.yaml`` (templates ``helpers/instance/_run-launcher.tpl`` and ``_run-coordinator.tpl``);
:func:`render_run_launcher` does the same mapping, refusing a key the chart's values schema would refuse, and
Dagster's config validation then checks the result against ``K8sRunLauncher.config_type()``. The executor
settings (``executor: {name: k8s, config}`` in deploy/helm/config/executor.yaml) are checked against
``k8s_job_executor``'s schema and must reach the Definitions. Misspelled keys must fail each check.
"""

from __future__ import annotations

import copy
import importlib.util
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._config import process_config, resolve_to_config_type
from dagster._core.run_coordinator import QueuedRunCoordinator
from dagster_k8s import K8sRunLauncher, k8s_job_executor

from dsv_platform.core.config.platform_config import load_config
from dsv_platform.core.config.platform_options import load_options
from dsv_platform.defs import build_defs
from dsv_platform.examples.fraud import CONFIG_DIR
from dsv_platform.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
IMAGE_CONFIG = ROOT / "deploy" / "helm" / "config"


def _deploy_script(name: str) -> Any:
    """A script of deploy/ (scripts, not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "deploy" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


add_executor = _deploy_script("add_executor").add_executor
RELEASE, NAMESPACE = "dagster", "dsv"

# camelCase value of the chart -> snake_case key of the K8sRunLauncher config, copied as is (the template's `toYaml`).
COPIED = {
    "kubeconfigFile": "kubeconfig_file",
    "envVars": "env_vars",
    "volumeMounts": "volume_mounts",
    "volumes": "volumes",
    "labels": "labels",
    "resources": "resources",
    "schedulerName": "scheduler_name",
    "securityContext": "security_context",
}
RUN_K8S = {
    "containerConfig": "container_config",
    "podSpecConfig": "pod_spec_config",
    "podTemplateSpecMetadata": "pod_template_spec_metadata",
    "jobSpecConfig": "job_spec_config",
    "jobMetadata": "job_metadata",
}
CHART_KEYS = {*COPIED, "image", "imagePullPolicy", "jobNamespace", "loadInclusterConfig", "envConfigMaps", "envSecrets", "failPodOnRunFailure", "runK8sConfig"}
QUEUED = {"maxConcurrentRuns": "max_concurrent_runs", "tagConcurrencyLimits": "tag_concurrency_limits", "dequeueIntervalSeconds": "dequeue_interval_seconds"}


class ChartRefuses(ValueError):
    """A key the chart's values schema (extra="forbid") would refuse before rendering anything."""


def _known(doc: dict[str, Any], allowed: set[str] | dict[str, str], where: str) -> dict[str, Any]:
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        raise ChartRefuses(f"{where}: unknown key(s) {unknown}")
    return doc


def render_run_launcher(values: dict[str, Any]) -> dict[str, Any]:
    """The ``config`` of the K8sRunLauncher block the chart writes into the instance's dagster.yaml."""
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    k8s = _known(values["runLauncher"]["config"]["k8sRunLauncher"], CHART_KEYS, "runLauncher.config.k8sRunLauncher")
    glob = values.get("global", {})
    config: dict[str, Any] = {
        "load_incluster_config": k8s["loadInclusterConfig"],
        "job_namespace": k8s.get("jobNamespace") or NAMESPACE,
        "image_pull_policy": k8s["imagePullPolicy"],
        "service_account_name": values.get("serviceAccount", {}).get("name") or RELEASE,
        "dagster_home": glob.get("dagsterHome", "/opt/dagster/dagster_home"),
        "instance_config_map": f"{RELEASE}-instance",
        "postgres_password_secret": glob.get("postgresqlSecretName", f"{RELEASE}-postgresql-secret"),
    }
    if values.get("imagePullSecrets"):
        config["image_pull_secrets"] = values["imagePullSecrets"]
    if "image" in k8s:
        image = k8s["image"]
        config["job_image"] = f"{image['repository']}:{image['tag']}"
    for chart_key, key in (("envConfigMaps", "env_config_maps"), ("envSecrets", "env_secrets")):
        if k8s.get(chart_key):
            config[key] = [ref["name"] for ref in k8s[chart_key] if "name" in ref]
    config |= {key: k8s[chart_key] for chart_key, key in COPIED.items() if k8s.get(chart_key)}
    if k8s.get("failPodOnRunFailure"):
        config["fail_pod_on_run_failure"] = True
    if k8s.get("runK8sConfig"):
        run = _known(k8s["runK8sConfig"], RUN_K8S, "runK8sConfig")
        config["run_k8s_config"] = {key: run[chart_key] for chart_key, key in RUN_K8S.items() if run.get(chart_key)}
    return config


def render_run_coordinator(values: dict[str, Any]) -> dict[str, Any]:
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["enabled"] and coordinator["type"] == "QueuedRunCoordinator"
    queued = _known(coordinator["config"]["queuedRunCoordinator"], QUEUED, "queuedRunCoordinator")
    return {key: queued[chart_key] for chart_key, key in QUEUED.items() if chart_key in queued}


def validate(schema: Any, config: dict[str, Any]) -> Any:
    result = process_config(resolve_to_config_type(schema), config)
    assert result.success, [e.message for e in result.errors or []]
    return result.value


def fails(schema: Any, config: dict[str, Any]) -> list[str]:
    result = process_config(resolve_to_config_type(schema), config)
    assert not result.success
    return [e.message for e in result.errors or []]


@pytest.fixture(scope="module")
def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def test_run_launcher_values_render_into_the_k8s_run_launcher_schema(values):
    config = validate(K8sRunLauncher.config_type(), render_run_launcher(values))
    assert set(config["env_secrets"]) == {"dsv-platform-stores", "dsv-platform-s3"}
    assert config["postgres_password_secret"] == values["global"]["postgresqlSecretName"]
    resources = config["run_k8s_config"]["container_config"]["resources"]
    # Sized from docs/benchmarks.md: DSV_BUILD_MEMORY (1 GiB) + 5x a 300 MiB partition + 0.5 GiB; request above the 10M-row peak.
    assert (resources["requests"]["memory"], resources["limits"]["memory"]) == ("1536Mi", "3Gi")
    assert "DSV_BUILD_MEMORY=1GiB" in config["env_vars"]
    # The stores' secrets reach the code server too, and the image's entry point is the one workspace.yaml loads.
    [deployment] = values["dagster-user-deployments"]["deployments"]
    assert {s["name"] for s in deployment["envSecrets"]} == set(config["env_secrets"])
    module = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"][0]["python_module"]
    assert deployment["dagsterApiGrpcArgs"][:2] == ["-m", module] and f'"-m", "{module}"' in (ROOT / "deploy" / "Dockerfile").read_text()


def test_misspelled_run_launcher_keys_fail(values):
    typo = copy.deepcopy(values)
    k8s = typo["runLauncher"]["config"]["k8sRunLauncher"]
    k8s["envSecret"] = k8s.pop("envSecrets")
    with pytest.raises(ChartRefuses, match="envSecret"):
        render_run_launcher(typo)
    rendered = render_run_launcher(values)
    rendered["env_secret"] = rendered.pop("env_secrets")
    assert any("env_secret" in m for m in fails(K8sRunLauncher.config_type(), rendered))
    rendered = render_run_launcher(values)
    rendered["load_incluster_config"] = "yes"  # a wrong type, not only a wrong name
    assert fails(K8sRunLauncher.config_type(), rendered)


def test_run_coordinator_limits_one_publication_run(values):
    config = validate(QueuedRunCoordinator.config_type(), render_run_coordinator(values))
    assert {"key": "dsv/publication", "limit": 1} in [{k: v for k, v in t.items() if k in ("key", "limit")} for t in config["tag_concurrency_limits"]]
    # The same queue as the production instance file (deploy/dagster.yaml) outside Kubernetes.
    instance = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())["run_coordinator"]
    assert instance["class"] == "QueuedRunCoordinator" and render_run_coordinator(values) == instance["config"]
    typo = copy.deepcopy(values)
    typo["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]["tagConcurrencyLimits"][0]["limt"] = 1
    assert fails(QueuedRunCoordinator.config_type(), render_run_coordinator(typo))


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
