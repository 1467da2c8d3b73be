"""Issue 26 item 15: Iceberg tables in OpenLineage events are named as OpenLineage's naming spec (and its Spark
integration) name them, by location: namespace ``file`` and the table's path, or ``s3://<bucket>`` and its key.
The name used before, ``canonical.<table>`` in ``dsv://<registry>``, stays as the dataset's ``symlinks`` facet.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsv_platform.adapters.lineage import openlineage as ol
from dsv_platform.bootstrap import build_platform
from dsv_platform.examples.fraud import events
from dsv_platform.examples.fraud.generator import FraudDomain
from dsv_platform.services.ingest.canonical_load import load_partition
from dsv_platform.services.lineage.openlineage import location_name, namespace
from dsv_platform.settings import load_settings
from dsv_platform_tests.interop.collector import collector, iceberg_table, node_of


@pytest.fixture(autouse=True)
def _openlineage_variables_restored() -> Iterator[None]:
    before = {k: v for k, v in os.environ.items() if k.startswith("OPENLINEAGE")}
    yield
    for k in [k for k in os.environ if k.startswith("OPENLINEAGE")]:
        del os.environ[k]
    os.environ.update(before)
    ol.EMITTER.reset()


def test_locations_map_to_namespace_and_name():
    assert location_name("file:///srv/dsv/warehouse/canonical/transactions") == ("file", "/srv/dsv/warehouse/canonical/transactions")
    assert location_name("file:///srv/my%20home/warehouse/canonical/t/") == ("file", "/srv/my home/warehouse/canonical/t")
    assert location_name("s3://lake/warehouse/canonical/transactions") == ("s3://lake", "warehouse/canonical/transactions")
    assert location_name("s3a://lake/w/canonical/t") == ("s3://lake", "w/canonical/t")
    assert location_name("gs://bucket/w/t") == ("gs://bucket", "w/t")


def _loaded(settings, url: str) -> tuple[str, str, object]:
    """Land and load one day of transactions with OpenLineage on: our namespace, the table's location, the load."""
    with pytest.MonkeyPatch.context() as mp, build_platform(settings) as platform:
        mp.setenv("OPENLINEAGE_URL", url)
        mp.delenv("OPENLINEAGE_CONFIG", raising=False)
        ol.EMITTER.reset()
        spec = platform.config.sources["transactions"]
        domain = FraudDomain(rows_per_day=20)
        platform.landing.land(events.daily_batch(domain, "transactions", domain.start), spec)
        load = load_partition(platform, spec, domain.start)
        location = platform.tables.table(spec).metadata.location
        return namespace(platform), location, load


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_emitted_iceberg_datasets_are_named_by_location_with_the_old_name_as_symlink(tmp_path: Path, where: str, request) -> None:
    with collector() as found:
        settings = load_settings({"OPENLINEAGE_URL": found.url}).with_home(tmp_path / "home")
        if where == "s3":
            s3 = request.getfixturevalue("s3_env")
            bucket = s3.create_bucket()
            settings = dataclasses.replace(settings, iceberg_warehouse=f"s3://{bucket}/warehouse", s3_endpoint_url=s3.endpoint_url, s3_region=s3.region)
        ns, location, load = _loaded(settings, found.url)
    [event] = [e for e in found.completed() if e["job"]["name"] == "canonical_load.transactions"]
    [out] = event["outputs"]
    if where == "local":
        assert (out["namespace"], out["name"]) == ("file", str(tmp_path / "home" / "warehouse" / "canonical" / "transactions"))
    else:
        assert (out["namespace"], out["name"]) == (f"s3://{bucket}", "warehouse/canonical/transactions")
    assert location.endswith(out["name"])
    assert out["facets"]["symlinks"]["identifiers"] == [{"namespace": ns, "name": "canonical.transactions", "type": "TABLE"}]
    assert iceberg_table(out) == "transactions" and node_of(out) == f"iceberg_snapshot:transactions@{load.snapshot_id}"
    assert event["job"]["namespace"] == ns and out["facets"]["version"]["datasetVersion"] == str(load.snapshot_id)
