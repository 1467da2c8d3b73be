"""deploy/helm/values.yaml against the Dagster chart's own values.schema.json, without helm or a cluster (issue 26).

The schema is vendored in deploy/helm/schema/ (its README names the version). ``helm install`` validates the chart's
defaults merged under our values; without the chart's values.yaml, :func:`chart_errors` validates the whole file
with the schema's ``required`` lifted (the chart's defaults fill those keys) and, strictly, the sections we write
whole. The Kubernetes objects the schema leaves to kubernetesjsonschema.dev are checked with the Kubernetes
client's models, as dagster-k8s reads them. Our own values are checked too: secrets, env, image, compute logs
where deploy/dagster.yaml keeps them, and the step memory sized from the scale benchmark.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client as k8s
import pytest
import yaml
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import UserDefinedDagsterK8sConfig
from dagster_k8s.models import k8s_snake_case_dict
from jsonschema import Draft7Validator, ValidationError, validators
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

ROOT = Path(__file__).resolve().parents[2]
VALUES = ROOT / "deploy" / "helm" / "values.yaml"
SCHEMA = json.loads((ROOT / "deploy" / "helm" / "schema" / "values.schema.json").read_text())
EXECUTOR = ROOT / "deploy" / "helm" / "config" / "executor.yaml"

# Peak RSS of the 10M-row `dsv build`, docs/benchmarks.md section "Scale: the build's peak RSS at 10M, profiled and
# bounded (issue 22, 2026-12-02)". Update it (and the values) when a larger run lands there (the 128.9M-row run).
MEASURED_BUILD_PEAK_MIB = 1_630
# Above the peak: the page cache of spill files and Parquet writes charged to the container, fragmentation, growth.
LIMIT_HEADROOM = 1.5
BENCHMARK_SECTION = "## Scale: the build's peak RSS at 10M, profiled and bounded"

# Sections we write whole: every key the chart requires of them is ours (Helm would not fill a list item).
STRICT = {
    ("runLauncher",): "RunLauncher",
    ("computeLogManager",): "ComputeLogManager",
    ("dagsterDaemon", "runCoordinator"): "RunCoordinator",
}


def _filled_by_the_charts_defaults(*_: Any) -> Iterator[Any]:
    return iter(())  # the schema's `required`, lifted where Helm merges the chart's values.yaml under ours


Lenient = validators.extend(Draft7Validator, {"required": _filled_by_the_charts_defaults})


def _remote_refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and not ref.startswith("#"):
            yield ref
        for value in node.values():
            yield from _remote_refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _remote_refs(value)


def _kubernetes_registry(schema: dict[str, Any]) -> Registry:
    """kubernetesjsonschema.dev (fetched by Helm, not here) as documents where every referenced definition is ``{}``."""
    documents: dict[str, dict[str, Any]] = {}
    for ref in _remote_refs(schema):
        url, _, pointer = ref.partition("#")
        node = documents.setdefault(url, {})
        for part in pointer.strip("/").split("/"):
            node = node.setdefault(part, {})
    return Registry().with_resources((url, Resource.from_contents(doc, default_specification=DRAFT7)) for url, doc in documents.items())


REGISTRY = _kubernetes_registry(SCHEMA)


def _strict(definition: str) -> Draft7Validator:
    return Draft7Validator({"$ref": f"#/definitions/{definition}", "definitions": SCHEMA["definitions"]}, registry=REGISTRY)


def _message(error: ValidationError) -> str:
    """The error; for an ``anyOf`` (most fields are ``X or null``), why the alternatives other than null failed."""
    reasons = [c.message for c in error.context or () if (c.validator, c.validator_value) != ("type", "null")]
    return "; ".join(reasons) or error.message


def chart_errors(values: dict[str, Any]) -> list[str]:
    """What the chart's schema refuses in ``values``, each as ``path: message``."""
    found = [(list(e.path), _message(e)) for e in Lenient(SCHEMA, registry=REGISTRY).iter_errors(values)]
    sections: list[tuple[list[Any], str, Any]] = []
    for path, definition in STRICT.items():
        section: Any = values
        for key in path:
            section = section.get(key, {})
        sections.append((list(path), definition, section))
    for i, deployment in enumerate(values.get("dagster-user-deployments", {}).get("deployments", [])):
        sections.append((["dagster-user-deployments", "deployments", i], "UserDeployment", deployment))
    for path, definition, section in sections:
        found += [(path + list(e.path), _message(e)) for e in _strict(definition).iter_errors(section)]
    return list(dict.fromkeys(f"{'.'.join(map(str, path)) or '<root>'}: {message}" for path, message in found))


def _kubernetes_objects(values: dict[str, Any]) -> Iterator[tuple[type, Any]]:
    k8s_launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    [deployment] = values["dagster-user-deployments"]["deployments"]
    for owner in (k8s_launcher, deployment):
        yield from ((k8s.V1Volume, v) for v in owner["volumes"])
        yield from ((k8s.V1VolumeMount, m) for m in owner["volumeMounts"])
    yield from ((k8s.V1EnvVar, e) for e in deployment["env"])
    yield k8s.V1ResourceRequirements, k8s_launcher["runK8sConfig"]["containerConfig"]["resources"]


def _mib(quantity: str) -> float:
    number, unit = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi|M|G)", quantity).groups()  # type: ignore[union-attr]
    return float(number) * {"Mi": 1, "Gi": 1024, "M": 1e6 / 2**20, "G": 1e9 / 2**20}[unit]


@pytest.fixture()
def values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def test_values_pass_the_charts_own_schema(values):
    assert chart_errors(values) == []
    # The chart accepts unknown top-level keys (its model allows extras): ours must all be the chart's.
    assert set(values) <= set(SCHEMA["properties"]), sorted(set(values) - set(SCHEMA["properties"]))
    for model, obj in _kubernetes_objects(values):
        k8s_snake_case_dict(model, obj)  # raises on a key the Kubernetes API does not have


@pytest.mark.parametrize(
    ("path", "change", "expected"),
    [
        (("runLauncher", "config", "k8sRunLauncher"), lambda d: d.update(envSecret=d.pop("envSecrets")), "envSecret"),
        (("runLauncher", "config", "k8sRunLauncher"), lambda d: d.update(loadInclusterConfig="yes"), "'yes' is not of type 'boolean'"),
        (("runLauncher", "config", "k8sRunLauncher", "runK8sConfig"), lambda d: d.update(containerConfg=d.pop("containerConfig")), "containerConfg"),
        (("computeLogManager",), lambda d: d.update(type="S3ComputeLogManger"), "S3ComputeLogManger"),
        (("computeLogManager", "config"), lambda d: d.update(gcsComputeLogManager=d.pop("s3ComputeLogManager")), "'s3ComputeLogManager' is a required"),
        (("computeLogManager", "config", "s3ComputeLogManager"), lambda d: d.pop("bucket"), "'bucket' is a required property"),
        (("dagsterDaemon", "runCoordinator", "config", "queuedRunCoordinator"), lambda d: d["tagConcurrencyLimits"][0].update(limt=1), "limt"),
        (("dagster-user-deployments", "deployments"), lambda d: d[0].pop("port"), "'port' is a required property"),
        (("dagsterWebserver",), lambda d: d.update(envSecret=d.pop("envSecrets")), "envSecret"),
    ],
)
def test_the_schema_refuses_a_misspelled_or_missing_key(values, path, change, expected):
    broken = copy.deepcopy(values)
    section = broken
    for key in path:
        section = section[key]
    change(section)
    assert any(expected in error for error in chart_errors(broken)), chart_errors(broken)


def test_a_misspelled_kubernetes_key_is_refused(values):
    resources = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]["resources"]
    with pytest.raises(Exception, match="limit"):
        k8s_snake_case_dict(k8s.V1ResourceRequirements, {**resources, "limit": resources["limits"]})
    with pytest.raises(Exception, match="persistentVolumeClam"):
        k8s_snake_case_dict(k8s.V1Volume, {"name": "dsv-home", "persistentVolumeClam": {"claimName": "dsv-home"}})


def test_compute_logs_go_to_the_bucket_of_deploy_dagster_yaml_with_credentials_from_secrets(values):
    instance = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())["compute_logs"]
    manager = values["computeLogManager"]
    assert manager["type"] == instance["class"] == "S3ComputeLogManager" and instance["module"] == "dagster_aws.s3.compute_log_manager"
    s3 = manager["config"]["s3ComputeLogManager"]
    assert s3 == {"bucket": instance["config"]["bucket"], "prefix": instance["config"]["prefix"], "endpointUrl": instance["config"]["endpoint_url"]}
    assert s3["bucket"] == {"env": "DSV_COMPUTE_LOG_BUCKET"} and s3["endpointUrl"] == {"env": "DSV_S3_ENDPOINT_URL"}
    # No credential in the file: every process that writes or shows compute logs gets both secrets.
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    [deployment] = values["dagster-user-deployments"]["deployments"]
    for owner in (launcher, deployment, values["dagsterWebserver"], values["dagsterDaemon"]):
        assert {s["name"] for s in owner["envSecrets"]} == {"dsv-platform-stores", "dsv-platform-s3"}
    text = VALUES.read_text()
    assert not re.search(r"(?i)(secret_?access_?key|access_?key_?id|password)\s*:", text), "a credential key written in values.yaml"


def test_the_stores_and_the_image_are_ours(values):
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    [deployment] = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e["value"] for e in deployment["env"]}
    assert {"DSV_HOME=/var/lib/dsv", "DSV_CONFIG_DIR=/opt/dsv/config", "DSV_BUILD_MEMORY=1GiB"} <= set(launcher["envVars"])
    assert (env["DSV_HOME"], env["DSV_CONFIG_DIR"]) == ("/var/lib/dsv", "/opt/dsv/config")
    assert values["global"]["postgresqlSecretName"] and values["generatePostgresqlPasswordSecret"] is False
    assert deployment["includeConfigInLaunchedRuns"] == {"enabled": True}
    module = yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"][0]["python_module"]
    assert deployment["dagsterApiGrpcArgs"][:2] == ["-m", module] and f'"-m", "{module}"' in (ROOT / "deploy" / "Dockerfile").read_text()
    # The same queue as the production instance file (deploy/dagster.yaml) outside Kubernetes.
    queued = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    instance = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())["run_coordinator"]["config"]
    assert (queued["maxConcurrentRuns"], queued["tagConcurrencyLimits"]) == (instance["max_concurrent_runs"], instance["tag_concurrency_limits"])
    assert {"key": "dsv/publication", "limit": 1} in queued["tagConcurrencyLimits"]


def test_the_step_memory_is_sized_from_the_measured_build_peak(values):
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text()
    section = benchmarks[benchmarks.index(BENCHMARK_SECTION) :].split("\n## ", 1)[0]
    assert f"**{MEASURED_BUILD_PEAK_MIB:,} MiB**" in section, "the constant is the figure docs/benchmarks.md reports"
    run_k8s = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    resources = run_k8s["containerConfig"]["resources"]
    assert _mib(resources["limits"]["memory"]) >= MEASURED_BUILD_PEAK_MIB * LIMIT_HEADROOM
    assert _mib(resources["requests"]["memory"]) >= MEASURED_BUILD_PEAK_MIB
    assert _mib(resources["requests"]["memory"]) <= _mib(resources["limits"]["memory"])
    # The step pods get exactly these: dagster-k8s merges the launcher's runK8sConfig with the executor's
    # step_k8s_config (K8sStepHandler: create_for_run, then the executor's context), and executor.yaml sets none.
    step_config = yaml.safe_load(EXECUTOR.read_text())["executor"]["config"].get("step_k8s_config", {})
    launcher = K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict({"container_config": run_k8s["containerConfig"]}))
    step = launcher.merge(K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(step_config)))
    assert step.run_k8s_config.container_config["resources"] == resources
