"""Suite-wide fixtures: real servers the suite starts itself (PostgreSQL, S3 on loopback); the slow set; Hypothesis profiles.

``make test`` runs everything but the ``slow`` and ``ui`` markers (the default set: 4:46 for 1,926 tests on 2 cores when last measured, the goal 5);
``make test-slow`` runs those, and ``.ci/run`` runs both, so every test still runs in CI.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = [
    "dsv_platform_tests.fixtures.postgres_server",
    "dsv_platform_tests.fixtures.s3_server",
    "dsv_platform_tests.fixtures.code_repo",
]

SLOW_MODULES = frozenset(
    {
        # end-to-end demos, each a whole story on a fresh home
        "cli/test_demo_cmd.py",
        "cli/test_readings_demo.py",
        "scenarios/test_gc_keeps_retained.py",
        "scenarios/test_config_only_source.py",
        # the three Dagster processes, Celery workers, PostgreSQL + S3 deployments
        "deploy/test_production_instance.py",
        "deploy/test_submit.py",
        "distributed/test_celery.py",
        "scenarios/test_production_resources.py",
        # processes killed at every step, and racing processes
        "services/test_kill_safety_gc.py",
        "services/test_kill_safety_privacy.py",
        "services/test_kill_safety_production.py",
        "services/test_kill_safety_publish.py",
        "services/test_concurrent_publishers.py",
        "adapters/test_registry_races.py",
        "adapters/test_shared_state_processes.py",
        # whole-command CLI stories
        "cli/test_diff_cmd.py",
        "cli/test_privacy_cmd.py",
        "cli/test_registry_cmd.py",
        # builds in a subprocess under a memory cgroup
        "services/test_build_memory.py",
        # the configuration walkthrough, run literally on CSV and Parquet
        "scenarios/test_configuration_walkthrough.py",
        # whole stories on a fresh home, each 30-150 s summed at the last measure (--durations); the capability
        # keeps quick tests in the default set (core/, adapters/, services/ modules of the same name)
        "scenarios/test_reference_source.py",
        "scenarios/test_reproduce_artifact.py",
        "scenarios/test_semantic_failure_modes.py",
        "scenarios/test_failure_modes.py",
        "scenarios/test_privacy_iceberg_metadata.py",
        "scenarios/test_privacy_every_copy.py",
        "scenarios/test_signed_manifests.py",
        "scenarios/test_readings_report.py",
        "scenarios/test_readings_time_series.py",
        "scenarios/test_gc_outruns_retention.py",
        "scenarios/test_compromised_source_writer.py",
        "cli/test_ingest_schema_evolution.py",
        "cli/test_lineage_cmd.py",
        "cli/test_gc_cmd.py",
        "cli/test_one_line_faults.py",
        "services/test_diff.py",
        "defs/test_rehearsal.py",
        # several builds per test, 15-40 s each at the last measure (issue 28); quicker tests of the same capability stay
        # in the default set (test_raw_agreement_paths, core/test_raw_agreement, cli/test_rehearse_cmd, services/test_trust,
        # services/test_slo, services/test_publisher's alias moves)
        "services/test_raw_agreement.py",
        "services/test_rehearsal.py",
        "services/test_alias_after_kill.py",
        "cli/test_trust_cmd.py",
        "cli/test_status_health.py",
        # builders killed at every step
        "services/test_publisher_crash.py",
    }
)
"""Test modules in the ``slow`` set, by path under dsv_platform_tests/ (``--durations`` in CI tells what to move here)."""

SLOW_TESTS = frozenset(
    {
        # single tests of 3.3-12 s each (every variant; not a fixture's setup) at the last measure of the default set
        # (--durations, issue 28): their modules' quick tests stay in the default set
        "cli/test_engine_memory_budget.py::test_rows_too_wide_for_the_engine_budget_fail_naming_the_setting_and_publish_nothing",
        "adapters/test_objects_bounded_memory.py::test_encrypted_put_and_get_stream_under_a_memory_cap",
        "services/test_privacy_sources.py::test_deletion_reaches_raw_batches_and_canonical_rows",
        "deploy/test_image_pins.py::test_the_image_keeps_the_users_platform_yaml_and_adds_only_the_executor",
        "deploy/test_local_trial.py::test_a_failing_step_still_stops_every_server_the_trial_started",
        "cli/test_ingest_write_audit_publish.py::test_a_blocked_ingest_exits_as_before_names_its_branch_and_the_build_does_not_see_its_rows",
        "services/test_trust.py::test_strict_builder_writes_only_staging_publisher_publishes_auditor_reads_no_data",
        "services/test_landing_order.py::test_as_known_at_t_is_the_same_whatever_the_landing_order",
        "cli/test_one_line_failures.py::test_build_before_any_ingest_is_one_line_that_says_what_to_run",
        "services/test_artifacts.py::test_gc_with_a_zero_window_keeps_what_an_artifact_root_reaches",
        "adapters/test_moved_home.py::test_two_processes_opening_a_moved_home_at_once_both_read",
        "services/test_integrity_signals.py::test_signals_of_real_builds",
        "distributed/test_executor_option.py::test_the_fork_server_preload_holds_the_code_location_and_the_instance_storage",
        "scenarios/test_expected_partitions_build.py::test_every_expected_day_present_publishes_and_a_missing_one_blocks",
        "adapters/test_iceberg_hygiene.py::test_an_orphan_data_file_on_an_s3_warehouse_is_found_and_collected",
        "adapters/test_iceberg_hygiene.py::test_old_metadata_files_go_and_realizations_and_time_travel_still_read",
        "scenarios/test_insider_registry.py::test_an_insider_with_database_access_is_refused_at_every_read",
        "services/test_artifacts.py::test_activities_attach_to_the_artifact_and_dsv_lineage_prints_them",
        "services/test_reproduce.py::test_reproduce_corrupted_object_is_named_then_rebuilt",
        "services/test_reproduce.py::test_reproduce_expired_input_is_rebuilt_from_raw",
        "cli/test_rehearse_cmd.py::test_rehearse_full_reproduces_what_the_daily_rehearsal_cannot_resolve",
        "adapters/test_envelope.py::test_envelope_over_s3_streams_and_detects_a_dropped_segment",
        "services/test_caches_keyed_by_manifest.py::test_a_report_re_pointed_at_another_manifest_is_refused_not_served",
        "scenarios/test_insider_scenario.py::test_every_attack_of_an_insider_is_refused_or_detected_naming_what_changed",
        "services/test_lineage.py::test_dsv_lineage_model_run_and_the_legacy_model_form",
    }
)
"""Single tests in the ``slow`` set, as ``module::function`` (every parameter of the function)."""

settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", settings.get_profile("default"), max_examples=400)
settings.load_profile(os.environ.get("DSV_HYPOTHESIS_PROFILE", "default"))  # make test-slow: thorough


LONGEST_FIRST = (
    "services/test_build_memory.py",
    "deploy/test_production_instance.py",
    "deploy/test_local_trial.py",
    "deploy/test_submit.py",
    "distributed/test_celery.py",
    "defs/test_fanout.py",
    "cli/test_ingest_bounded_memory.py",
    "scenarios/test_production_resources.py",
    "cli/test_gc_cmd.py",
)
"""The longest single tests at the last measure (``--durations``), collected first: xdist hands them out before the
short ones, so no worker starts a two-minute test while the other has nothing left (groups go first anyway)."""


def _module(config: pytest.Config, item: pytest.Item) -> str | None:
    try:
        return item.path.relative_to(config.rootpath / "dsv_platform_tests").as_posix()
    except ValueError:
        return None


def _check_groups(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` each grouped test's node id carries ``@group`` (xdist adds it before this hook):
    without it the group's tests spread over the workers and each runs the group's expensive fixtures again."""
    if not (hasattr(config, "workerinput") and config.getvalue("loadgroup")):
        return
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not apply xdist_group to {lost[0]} (and {len(lost) - 1} more): check the pytest pin")


_SHARED_SCOPES = frozenset({"module", "class", "package"})


def _shares_a_fixture(item: pytest.Item) -> bool:
    """The test uses a fixture made once per module, class or package (a world several tests read)."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(d.scope in _SHARED_SCOPES for defs in info.name2fixturedefs.values() for d in defs)


SECOND_BACKEND = "postgres"
"""A test parametrized over registry or key-store backends runs its PostgreSQL variant in the slow set and its SQLite (or local)
variant in the default set: about 180 variants, 160 s summed at the last measure. Tests only about PostgreSQL stay."""


def _string_params(item: pytest.Item) -> Iterator[tuple[tuple[object, ...], str]]:
    """Each string parameter of ``item``, with the test's shape apart from it: module, function, name, the other parameters."""
    params = getattr(getattr(item, "callspec", None), "params", None) or {}
    for name, value in params.items():
        if isinstance(value, str):
            others = tuple(sorted((k, repr(v)) for k, v in params.items() if k != name))
            yield (item.path, getattr(item, "originalname", item.name), name, others), value


def _backend_variants(items: list[pytest.Item]) -> set[str]:
    """Node ids of the PostgreSQL variants of backend-parametrized tests that have a variant on another backend."""
    values: dict[tuple[object, ...], set[str]] = {}
    for item in items:
        for shape, value in _string_params(item):
            values.setdefault(shape, set()).add(value)
    return {item.nodeid for item in items for shape, value in _string_params(item) if value == SECOND_BACKEND and len(values[shape]) > 1}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow set (its modules, the PostgreSQL variants) before ``-m`` deselects by marker (tryfirst). A module whose tests share a module-scoped world
    becomes one xdist group: ``--dist loadgroup`` hands ungrouped tests out one at a time, so both workers built the
    world (a 14 s fixture ran twice); grouped, one worker builds it once."""
    second_backend = _backend_variants(items)
    for item in items:
        module = _module(config, item)
        if module in SLOW_MODULES or item.nodeid in second_backend or f"{module}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
        if module is not None and item.get_closest_marker("xdist_group") is None and _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(module.removesuffix(".py").replace("/", ".")))


class _Order:
    """After deselection and xdist's group suffixes (trylast): check the groups, then the longest tests first."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        _check_groups(config, items)
        rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
        items.sort(key=lambda item: rank.get(_module(config, item) or "", len(rank)))  # stable: modules stay contiguous


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Order(), "dsv-test-order")


def pytest_sessionstart(session: pytest.Session) -> None:
    """In CI the compiled row encoder must be built: its 31 tests never skip silently there (a compiler is on every CI machine)."""
    from dsv_platform import _native

    if os.environ.get("CI", "").lower() in ("1", "true", "yes") and not _native.available:
        raise pytest.UsageError(
            "CI: dsv_platform._native (the compiled row encoder) is not built, so its tests would skip; "
            "install gcc and the Python headers and reinstall (make venv)"
        )
