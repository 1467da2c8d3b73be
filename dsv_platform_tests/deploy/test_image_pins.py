"""Issue 26 items 1 and 2: the image is the lock, a run inside it records the commit it was built from, and the
user's platform.yaml stays theirs.

The image has no ``.git``. deploy/Dockerfile is carried out on a folder (image_layout.py: its COPY instructions
and the scripts it runs, for real), and a fresh interpreter inside that layout records the code pins a build and a
model run take, and (slow) the fraud model is trained there on PostgreSQL and S3. ``dsv reproduce``'s own checks
then accept those pins against a checkout holding the commit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shlex
import shutil
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement

from dsv_platform.services.reproduction.envbuild import lock_at
from dsv_platform.services.reproduction.reproduce import check_code
from dsv_platform.services.reproduction.reproduce_training import restorable
from dsv_platform_tests.deploy.image_layout import DOCKERFILE, REPO, build, parse, run_inside
from dsv_platform_tests.fixtures.production_stores import production_stores


def _deploy_script(name: str) -> Any:
    """A script of deploy/ (scripts, not a package), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, REPO / "deploy" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


deploy_lock = _deploy_script("deploy_lock")
normalize, pins, version = deploy_lock.normalize, deploy_lock.pins, deploy_lock.version

PROBE = """
import json
from dsv_platform.services.publication.realization_inputs import REPO, code_pin
from dsv_platform.services.reproduction.code_pins import lockfile_sha256
from dsv_platform.services.reproduction.model_run import trainer_code
from dsv_platform.examples.fraud import model
code = trainer_code(model.TRAINER)
print(json.dumps({"build": code_pin(REPO).to_document(), "trainer": code, "lock": lockfile_sha256(code["repo"], code["commit"])}))
"""


def _checkout(tmp_path: Path) -> tuple[Path, str]:
    """A repository whose one commit holds this requirements.lock: where the image was built from."""
    repo = tmp_path / "checkout"
    repo.mkdir()
    shutil.copy(REPO / "requirements.lock", repo / "requirements.lock")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    for args in (["init", "-q"], ["add", "requirements.lock"], ["commit", "-q", "-m", "lock"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return repo, subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


def _probe(image) -> dict:
    done = run_inside(image, PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_run_in_the_image_records_the_baked_commit_and_lock_and_dsv_reproduce_accepts_them(tmp_path: Path) -> None:
    repo, commit = _checkout(tmp_path)
    image = build(tmp_path / "image", {"DSV_COMMIT": commit, "DSV_DIRTY": "false"})
    assert not any(image.root.rglob(".git")) and (image.site_packages / "dsv_platform" / "build_pin.json").is_file()
    pins_ = _probe(image)
    lock = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()
    assert pins_["build"]["commit"] == commit and pins_["build"]["dirty"] is False
    assert (pins_["trainer"]["commit"], pins_["trainer"]["dirty"]) == (commit, False)
    assert pins_["lock"] == lock
    # dsv reproduce, on a machine with the checkout (the image's package folder is not there): the pins are accepted
    run = {"code": pins_["trainer"], "environment": {"lockfile_sha256": pins_["lock"]}}
    assert restorable(run, repo) == repo
    assert hashlib.sha256(lock_at(repo, commit)).hexdigest() == pins_["lock"]
    assert check_code(pins_["build"], repo).passed


def test_a_dirty_build_is_recorded_dirty_and_refused_by_dsv_reproduce(tmp_path: Path) -> None:
    repo, commit = _checkout(tmp_path)
    pins_ = _probe(build(tmp_path / "image", {"DSV_COMMIT": commit, "DSV_DIRTY": "true"}))
    assert pins_["trainer"]["dirty"] is True and pins_["build"]["dirty"] is True
    assert restorable({"code": pins_["trainer"], "environment": {"lockfile_sha256": pins_["lock"]}}, repo) is None
    assert not check_code(pins_["build"], repo).passed


def test_without_a_commit_the_image_records_unknown_never_a_guess_or_a_stale_pin(tmp_path: Path) -> None:
    stale = REPO / "dsv_platform" / "build_pin.json"
    assert not stale.exists()
    image = build(tmp_path / "image")  # no build args: DSV_COMMIT=unknown
    assert not (image.site_packages / "dsv_platform" / "build_pin.json").exists()
    pins_ = _probe(image)
    assert pins_["build"]["commit"] == "unknown" and pins_["trainer"]["commit"] == "unknown" and pins_["lock"] == "unknown"


@pytest.mark.parametrize(("args", "named"), [({"DSV_COMMIT": "HEAD"}, "DSV_COMMIT='HEAD'"), ({"DSV_COMMIT": "a" * 40, "DSV_DIRTY": "1"}, "DSV_DIRTY='1'")])
def test_a_malformed_commit_or_dirty_flag_fails_the_build_naming_it(tmp_path: Path, args: dict[str, str], named: str) -> None:
    with pytest.raises(subprocess.CalledProcessError) as failed:
        build(tmp_path / "image", args)
    assert named in failed.value.stderr


def _pip_installs(runs: list[str]) -> list[list[str]]:
    return [shlex.split(part) for run in runs for part in run.split("&&") if shlex.split(part)[:2] == ["pip", "install"]]


def test_the_dockerfile_installs_only_from_the_locks(tmp_path: Path) -> None:
    steps = parse(DOCKERFILE.read_text())
    runs = [args for name, args in steps if name == "RUN"]
    installs = _pip_installs(runs)
    assert installs, "the Dockerfile installs nothing with pip"
    assert all("--no-deps" in words for words in installs), f"a pip install that resolves dependencies: {installs}"
    first = installs[0]
    assert "--require-hashes" in first
    files = [first[i + 1] for i, w in enumerate(first) if w == "-r"]
    assert files == ["requirements.lock", "deploy/requirements-deploy.lock"]
    assert [w for w in installs[-1] if not w.startswith("-")] == ["pip", "install", "."], "then the package alone"
    copied = [w for name, args in steps if name == "COPY" for w in shlex.split(args)[:-1]]
    assert all(f in copied for f in files), "each lock is copied into the image"
    baked = next(i for i, (name, args) in enumerate(steps) if name == "RUN" and "bake_pin.py" in args)
    package = next(i for i, (name, args) in enumerate(steps) if name == "RUN" and _pip_installs([args]) and _pip_installs([args])[-1][-1] == ".")
    assert baked < package, "the pin is baked into the package before the package is installed"


def _locked(path: Path) -> dict[str, str]:
    return {name: version(block) for name, block in pins(path.read_text()).items()}


def test_the_two_locks_hold_every_dependency_of_the_package_and_its_deploy_extra() -> None:
    """What ``pip check`` asks inside the build: the locks' union holds pyproject's dependencies and the deploy extra's, and
    is closed under Requires-Dist (extras included; each package's own metadata from this venv, installed from the same locks)."""
    base, deploy = _locked(REPO / "requirements.lock"), _locked(REPO / "deploy" / "requirements-deploy.lock")
    assert not base.keys() & deploy.keys(), "the deploy lock re-pins a package of requirements.lock"
    locked = base | deploy
    marker_env = default_environment() | {"python_version": "3.11", "python_full_version": "3.11.9", "sys_platform": "linux", "platform_system": "Linux"}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    top = [Requirement(t) for t in [*project["dependencies"], *project["optional-dependencies"]["deploy"]]]
    wanted = [(r, "dsv_platform") for r in top if r.marker is None or r.marker.evaluate(marker_env)]
    missing, checked = [], set()
    while wanted:
        req, by = wanted.pop()
        name = normalize(req.name)
        if name not in locked:
            missing.append(f"{req} (for {by})")
            continue
        assert req.specifier.contains(locked[name], prereleases=True), f"{name}=={locked[name]} does not satisfy {req} (for {by})"
        if (name, tuple(sorted(req.extras))) in checked:
            continue
        checked.add((name, tuple(sorted(req.extras))))
        dist = metadata.distribution(name)
        assert dist.version == locked[name], f"the test venv has {name} {dist.version}, the lock {locked[name]}"
        for text in dist.requires or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate(marker_env | {"extra": e}) for e in {"", *req.extras}):
                sub.marker = None
                wanted.append((sub, name))
    assert not missing, f"dependencies neither lock holds: {missing}"
    assert {"dagster-postgres", "dagster-k8s", "dagster-celery", "redis"} <= deploy.keys()


CONFIG_PROBE = """
import json
from dsv_platform.core.config.platform_options import load_options
from dsv_platform.defs import build_defs
from dsv_platform.settings import load_settings
settings = load_settings()
defs = build_defs(settings)
options = load_options(settings.config_dir)
keys = sorted(k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys())
job = defs.resolve_job_def("daily_ingest_job")
print(json.dumps({"start": str(options.partitions_start), "modules": list(options.dagster_modules), "keys": keys,
                  "executor": job.executor_def.name, "config_dir": str(settings.config_dir)}))
"""


def test_the_image_keeps_the_users_platform_yaml_and_adds_only_the_executor(tmp_path: Path) -> None:
    """Another domain's folder (the readings example) as --build-arg DSV_CONFIG: its partitions and modules, not the fraud example's."""
    users = REPO / "dsv_platform" / "examples" / "readings" / "config"
    image = build(tmp_path / "image", {"DSV_CONFIG": users.relative_to(REPO).as_posix()})
    written = image.path(image.env["DSV_CONFIG_DIR"]) / "platform.yaml"
    assert written.read_text().startswith((users / "platform.yaml").read_text()), "the user's platform.yaml, byte for byte, first"
    done = run_inside(image, CONFIG_PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["config_dir"] == str(written.parent)
    assert seen["start"].startswith("2025-12-01") and seen["modules"] == ["dsv_platform.examples.readings.defs"]
    assert seen["executor"] == "k8s" and seen["keys"]
    assert not [k for k in seen["keys"] if "fraud" in k], f"the fraud example's assets beside the user's: {seen['keys']}"


def test_deploy_lock_keeps_only_the_extras_packages_and_refuses_a_changed_pin() -> None:
    base = (REPO / "requirements.lock").read_text()
    extra = "kombu==5.7.0 \\\n    --hash=sha256:" + "1" * 64 + "\n"
    assert deploy_lock.deploy_lock(base, base + extra) == deploy_lock.HEADER + extra
    repinned = base.replace("\nduckdb==1.5.5 \\", "\nduckdb==1.5.4 \\")
    assert repinned != base
    with pytest.raises(SystemExit, match="duckdb"):
        deploy_lock.deploy_lock(base, repinned + extra)


MODEL_PROBE = """
import datetime as dt, json, os
import dagster as dg
from dsv_platform.bootstrap import build_platform
from dsv_platform.defs import build_defs
from dsv_platform.defs.partitions import RANGE_END, RANGE_START
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.settings import load_settings
settings = load_settings()
days = ["2026-06-01", "2026-06-02"]
settings.drop_folder.mkdir(parents=True, exist_ok=True)
domain = FraudDomain(rows_per_day=120)
for source in ("transactions", "chargebacks", "account_features"):
    for day in days:
        batch = events.daily_batch(domain, source, dt.date.fromisoformat(day))
        path = settings.drop_folder / batch.file_name
        path.write_bytes(batch.data)
        os.utime(path, (batch.recorded_at.timestamp(), batch.recorded_at.timestamp()))
defs = build_defs(settings)
with dg.DagsterInstance.ephemeral() as instance:
    run = {"instance": instance, "resources": defs.resources}
    assert dg.materialize(defs.assets, selection="group:raw or group:canonical", tags={RANGE_START: days[0], RANGE_END: days[-1]}, **run).success
    assert dg.materialize(defs.assets, selection="labels/fraud", partition_key="v6", **run).success
    done = dg.materialize(defs.assets, selection=["datasets/fraud_training_set/v6", "datasets/fraud_training_set/v6/splits", "models/fraud_model"], **run)
    assert done.success
mats = {e.materialization.asset_key.to_user_string(): e.materialization.metadata for e in done.get_asset_materialization_events()}
with build_platform(settings) as platform:
    doc = json.loads(platform.store.get(mats["models/fraud_model"]["run_manifest_object"].value))
print(json.dumps({"code": doc["code"], "environment": doc["environment"]}))
"""


@pytest.mark.slow  # ingest, labels, a dataset build and a training run in a fresh interpreter (about 25 s)
@pytest.mark.postgres
@pytest.mark.s3
def test_a_model_trained_in_the_image_on_postgresql_and_s3_is_restorable(tmp_path: Path, postgres_server: Any, s3_env: Any) -> None:
    """The fraud model trained inside the image layout, its registry on PostgreSQL and its stores in S3: the run manifest
    the registry keeps records the baked commit and lock hash, and ``dsv reproduce`` would restore that run."""
    repo, commit = _checkout(tmp_path)
    image = build(tmp_path / "image", {"DSV_COMMIT": commit, "DSV_DIRTY": "false"})
    env = s3_env.env() | production_stores(postgres_server, s3_env) | {"DSV_HOME": str(tmp_path / "dsv")}
    done = run_inside(image, MODEL_PROBE, extra_env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads(done.stdout.strip().splitlines()[-1])
    lock = hashlib.sha256((REPO / "requirements.lock").read_bytes()).hexdigest()
    assert (run["code"]["commit"], run["code"]["dirty"]) == (commit, False) and run["environment"]["lockfile_sha256"] == lock
    assert restorable(run, repo) == repo
