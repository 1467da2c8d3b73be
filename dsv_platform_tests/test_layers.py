"""The layer arrows point down (docs/architecture.md, "Layers in the code"): core <- adapters <- services <- defs / cli; bootstrap composes."""

from __future__ import annotations

import ast
import functools
import itertools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "dsv_platform"
SDKS = {"dagster", "pyiceberg", "boto3", "botocore", "sqlalchemy"}
FORBIDDEN = {
    "core": SDKS
    | {"dsv_platform.adapters", "dsv_platform.services", "dsv_platform.defs", "dsv_platform.cli", "dsv_platform.bootstrap", "dsv_platform.settings"},
    "adapters": {
        "dagster",
        "dsv_platform.services",
        "dsv_platform.defs",
        "dsv_platform.cli",
        "dsv_platform.bootstrap",
        "dsv_platform.settings",
        "dsv_platform.reader",
        "dsv_platform.domain",
        "dsv_platform.examples",
    },
    "services": {"dagster", "pyiceberg", "sqlalchemy", "boto3", "botocore", "dsv_platform.defs", "dsv_platform.cli", "dsv_platform.settings"},
}
# Only these files may import the SDK (module -> allowed files, relative to the package).
ONLY_IN = {
    # key_store_pg.py: the crypto-erasure keys in a PostgreSQL database of their own (issue 26 item 4), a key store like
    # key_store.py beside it (in adapters/registry/ it would close an import cycle: registry -> objects -> registry)
    # cli/event_log.py: Dagster's own SQLite event log (SQLAlchemy underneath), keeping its engines for dsv's in-process runs
    "sqlalchemy": ("adapters/registry/", "adapters/objects/key_store_pg.py", "cli/event_log.py"),
    "pyiceberg": (
        "adapters/iceberg/iceberg.py",
        "adapters/iceberg/iceberg_catalog.py",
        "adapters/iceberg/iceberg_history.py",  # which snapshots of a history hold a row: each manifest and file read once
        "adapters/iceberg/iceberg_refs.py",
        "adapters/iceberg/iceberg_relocate.py",
        "adapters/iceberg/iceberg_schema.py",
        "adapters/iceberg/iceberg_stream.py",
        "adapters/iceberg/iceberg_wap.py",
        "adapters/iceberg/sql_catalog.py",  # the SQL catalog that parses each metadata file once per process
    ),
    # s3_client.py makes every S3 client (session, credential check, retries); botocore's errors are also read by
    # s3_lock.py (the Object Lock writes and versioned reads of audit exports, issue 24) and drop_prefix.py (the S3 drop
    # location the drop sensor lists and a landing run downloads from, issue 26 item 11)
    "boto3": ("adapters/objects/s3_client.py",),
    "botocore": ("adapters/objects/s3_store.py", "adapters/objects/s3_client.py", "adapters/objects/s3_lock.py", "adapters/objects/drop_prefix.py"),
    "openlineage": ("adapters/lineage/openlineage.py",),
    "duckdb": ("adapters/iceberg/duckdb_iceberg.py", "adapters/engine/duckdb_engine.py"),
}
SETTINGS_IMPORTERS = ("bootstrap.py", "cli/", "defs/", "definitions.py", "__init__.py", "settings.py")

# The platform never imports the example it ships: only dsv_platform/examples itself (and tests) may.
PLATFORM_LAYERS = ("adapters", "services", "core", "defs", "cli")
PLATFORM_MODULES = ("bootstrap.py", "settings.py", "definitions.py", "__init__.py")
_DOMAIN = ("dsv_platform.domain", "dsv_platform.examples")


@functools.cache
def _tree(path: Path) -> ast.Module:
    """Each file parsed once per worker: a dozen checks walk the same 400 files."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@functools.cache
def _imports(path: Path) -> list[tuple[int, str]]:
    """Every absolute import of the file as (line, module), computed once per worker (callers only read it)."""
    tree = _tree(path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _rel(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


def _violations(layer: str) -> list[str]:
    bad = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, module in _imports(path):
            bad += [f"{_rel(path)}:{line} imports {module}" for f in FORBIDDEN[layer] if _matches(module, f)]
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_only_downwards(layer: str) -> None:
    assert _violations(layer) == []


def test_the_platform_never_imports_the_example_it_ships() -> None:
    """adapters, services, core, defs and cli (and the top-level modules) never import dsv_platform.examples (nor the old domain)."""
    paths = [p for layer in PLATFORM_LAYERS for p in sorted((PACKAGE / layer).rglob("*.py"))] + [PACKAGE / m for m in PLATFORM_MODULES]
    bad = [f"{_rel(p)}:{line} imports {m}" for p in paths if p.exists() for line, m in _imports(p) if any(_matches(m, d) for d in _DOMAIN)]
    assert bad == []
    assert not (PACKAGE / "domain").exists()


@pytest.mark.parametrize("sdk", sorted(ONLY_IN))
def test_sdks_only_in_their_adapter(sdk: str) -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if any(rel.startswith(allowed) for allowed in ONLY_IN[sdk]):
            continue
        bad += [f"{rel}:{line} imports {module}" for line, module in _imports(path) if _matches(module, sdk)]
    assert bad == []


def test_settings_reach_only_the_composition_root_and_the_entry_points() -> None:
    bad = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel.startswith(SETTINGS_IMPORTERS) and (rel.startswith(("cli/", "defs/")) or "/" not in rel):
            continue
        bad += [f"{rel}:{line} imports {module}" for line, module in _imports(path) if _matches(module, "dsv_platform.settings")]
    assert bad == []


def test_the_reader_module_is_gone() -> None:
    assert not (PACKAGE / "reader.py").exists()
    users = [f"{_rel(p)}:{line}" for p in sorted(PACKAGE.rglob("*.py")) for line, m in _imports(p) if _matches(m, "dsv_platform.reader")]
    assert users == []


def test_layers_check_detects_a_violation(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import sqlalchemy\nfrom dagster import asset\n")
    assert [m for _, m in _imports(probe)] == ["sqlalchemy", "dagster"]


def test_layers_only_settings_reads_the_environment() -> None:
    readers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "settings.py" and path.parent == PACKAGE:
            continue
        text = path.read_text(encoding="utf-8")
        if "os.environ" in text or "os.getenv" in text or "getenv(" in text:
            readers.append(str(path.relative_to(PACKAGE.parent)))
    assert readers == []


# ---------------------------------------------------------------- capability packages (docs/architecture.md)

CAPABILITY_LAYERS = ("core", "adapters", "services")
ROOT_MODULES = {"core": {"errors", "canonical_json", "config_yaml"}, "adapters": set(), "services": set()}
"""The only modules a layer keeps at its root, below every capability package: the shared vocabulary."""


def _capability(module: str) -> str | None:
    """``core.identity`` for ``dsv_platform.core.identity.hashing``; None outside a capability package (a root module, another layer)."""
    parts = module.split(".")
    if len(parts) < 3 or parts[0] != "dsv_platform" or parts[1] not in CAPABILITY_LAYERS or parts[2] in ROOT_MODULES[parts[1]]:
        return None
    return f"{parts[1]}.{parts[2]}"


def _capability_edges() -> dict[str, dict[str, str]]:
    """package -> {package it imports: one file:line that does} over every import, TYPE_CHECKING and function-local ones included."""
    edges: dict[str, dict[str, str]] = {}
    for layer in CAPABILITY_LAYERS:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            source = _capability(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
            if source is None:
                continue
            for node in ast.walk(_tree(path)):
                names: list[str] = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
                for name in names:
                    target = _capability(name)
                    if target is not None and target != source:
                        edges.setdefault(source, {}).setdefault(target, f"{_rel(path)}:{node.lineno}")
    return edges


def _cycle(edges: dict[str, dict[str, str]]) -> list[str]:
    """One import cycle among the packages as ``a -> b (file:line)`` steps, or [] when the graph is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for target in sorted(edges.get(node, {})):
            if state.get(target) == 1:
                ring = [*path[path.index(target) :], target]
                return [f"{a} -> {b} ({edges[a][b]})" for a, b in itertools.pairwise(ring)]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(edges):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_capability_packages_import_each_other_without_cycles() -> None:
    assert _cycle(_capability_edges()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycle({"core.a": {"core.b": "x.py:1"}, "core.b": {"core.a": "y.py:2"}}) == ["core.a -> core.b (x.py:1)", "core.b -> core.a (y.py:2)"]
    assert _cycle({"core.a": {"core.b": "x.py:1"}}) == []


@pytest.mark.parametrize("layer", CAPABILITY_LAYERS)
def test_every_module_lives_in_a_capability_package(layer: str) -> None:
    """A layer's root holds only its shared vocabulary; everything else is one level below, in the package that owns it."""
    loose = sorted(p.stem for p in (PACKAGE / layer).glob("*.py") if p.stem != "__init__" and p.stem not in ROOT_MODULES[layer])
    assert loose == []
