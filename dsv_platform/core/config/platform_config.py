"""The configuration folder: sources, dataset definitions and label registrations, checked at load time.

Layout (``DSV_CONFIG_DIR``; the default is the packaged fraud example)::

    sources/<name>.yaml            a contract plus landing, valid_time, entity, aliases
    datasets/<name>_<version>.yaml a dataset definition
    labels/<name>.yaml             a label: its contract and the module registering its versions
    platform.yaml                  optional: partitions start, Dagster modules, demo (core.platform_options)

Every mistake is a one-line :class:`ConfigError` naming the file and the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from dsv_platform.core.config import asset_keys
from dsv_platform.core.config.dataset_definition import AsOfJoin, DatasetDefinition, load_definition
from dsv_platform.core.config.labels import LabelFile, LabelVersion, load_label_versions, parse_label_file
from dsv_platform.core.config.platform_options import PlatformOptions, load_options
from dsv_platform.core.config.source import TIME_TYPES, SourceSpec, parse_source
from dsv_platform.core.config_yaml import ConfigError, read_yaml
from dsv_platform.core.contracts.contract import Column, LogicalType
from dsv_platform.core.identity.example_id import example_id_column

_NAME = re.compile(r"^[a-z][a-z0-9_]*\Z")
_DATASET_FILE = re.compile(r"^(?P<name>[a-z][a-z0-9_]*)_(?P<version>[A-Za-z0-9][A-Za-z0-9.-]*)\Z")


@dataclass(frozen=True)
class PlatformConfig:
    folder: Path
    sources: dict[str, SourceSpec]
    datasets: list[DatasetDefinition]
    labels: dict[str, dict[int, LabelVersion]] = field(default_factory=dict)
    label_files: tuple[LabelFile, ...] = ()
    options: PlatformOptions = field(default_factory=PlatformOptions)

    @property
    def label_modules(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.module for f in self.label_files))

    def label(self, name: str, version: int) -> LabelVersion:
        try:
            return self.labels[name][version]
        except KeyError:
            raise ConfigError(
                f"no label version {name}:v{version}; known: {sorted(f'{n}:v{v}' for n in self.labels for v in self.labels[n])}", file=self.folder
            ) from None

    def dataset(self, name: str, version: str) -> DatasetDefinition:
        for d in self.datasets:
            if (d.name, d.version) == (name, version):
                return d
        raise ConfigError(f"no dataset {name}:{version}; known: {[d.ref for d in self.datasets]}", file=self.folder)


def _yaml_files(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or path.is_dir():
            continue
        if path.suffix == ".yml":
            raise ConfigError("configuration files end in .yaml", file=path)
        if path.suffix == ".yaml":
            yield path


def _load_sources(folder: Path) -> dict[str, SourceSpec]:
    sources: dict[str, SourceSpec] = {}
    for path in _yaml_files(folder):
        if not _NAME.match(path.stem):
            raise ConfigError("a source file is named <name>.yaml with <name> in [a-z0-9_]", file=path, key="name")
        sources[path.stem] = parse_source(read_yaml(path), file=path)
    return sources


def _load_datasets(folder: Path) -> list[DatasetDefinition]:
    found = []
    for path in _yaml_files(folder):
        if not _DATASET_FILE.match(path.stem):
            raise ConfigError("a dataset file is named <name>_<version>.yaml", file=path, key="name")
        definition = load_definition(path)
        if path.stem != definition.asset_prefix:
            raise ConfigError(f"the file of {definition.ref} must be named {definition.asset_prefix}.yaml", file=path, key="version")
        asset_keys.component(definition.version, "version", file=path)  # datasets/<name>/<version> is its asset key
        found.append(definition)
    return sorted(found, key=lambda d: (d.name, d.version))


def _load_labels(folder: Path, sources: dict[str, SourceSpec], *, import_modules: bool) -> tuple[tuple[LabelFile, ...], dict[str, dict[int, LabelVersion]]]:
    files = tuple(parse_label_file(read_yaml(p), file=p) for p in _yaml_files(folder))
    labels: dict[str, dict[int, LabelVersion]] = {}
    for lf in files if import_modules else ():
        labels[lf.name] = load_label_versions(lf)
        for lv in labels[lf.name].values():
            unknown = [s for s in lv.inputs if s not in sources]
            if unknown:
                raise ConfigError(f"label {lv.ref} reads unknown source(s) {unknown}; known: {sorted(sources)}", file=lf.file, key="module")
    return files, labels


def load_config(folder: str | Path, *, import_labels: bool = True) -> PlatformConfig:
    """Load and cross-check a configuration folder (``import_labels``: import the label modules too)."""
    root = Path(folder)
    if not root.is_dir():
        raise ConfigError("the configuration folder does not exist", file=root)
    options = load_options(root)
    sources = _load_sources(root / "sources")
    if not sources:
        raise ConfigError("no source is configured (sources/<name>.yaml)", file=root / "sources")
    files, labels = _load_labels(root / "labels", sources, import_modules=import_labels)
    datasets = _load_datasets(root / "datasets")
    for definition in datasets:
        check_definition(definition, sources, {lf.name: lf for lf in files}, labels if import_labels else None)
    return PlatformConfig(root, sources, datasets, labels, files, options)


def _file(definition: DatasetDefinition) -> str:
    return str(definition.contract.source or definition.ref)


def arrow_identity(column: Column) -> tuple[object, ...]:
    """What decides ``column.arrow_type``, compared without importing pyarrow (loading the configuration stays light)."""
    if column.type is LogicalType.DECIMAL:
        return (column.type, column.precision, column.scale)
    if column.type is LogicalType.TIMESTAMP:
        return (column.type, column.resolution or "us")
    return (column.type,)


def _check_join(definition: DatasetDefinition, i: int, join: AsOfJoin, base: SourceSpec, sources: dict[str, SourceSpec]) -> None:
    file, where = _file(definition), f"as_of_joins[{i}]"
    other = sources.get(join.source)
    if other is None:
        raise ConfigError(f"unknown source {join.source!r}; known: {sorted(sources)}", file=file, key=f"{where}.source")
    for col in join.on:
        for spec in (base, other):
            if col not in spec.contract.column_names:
                raise ConfigError(f"{col!r} is not a column of source {spec.name!r}", file=file, key=f"{where}.on")
        if arrow_identity(base.contract.column(col)) != arrow_identity(other.contract.column(col)):
            raise ConfigError(f"{col!r} has different types in {base.name!r} and {other.name!r}", file=file, key=f"{where}.on")
    if join.known_at is not None and join.time is None:
        raise ConfigError("'as_known_at' needs 'time' (the base column whose instant the source is read as known at)", file=file, key=f"{where}.time")
    if other.valid_time is None:  # a reference table without valid time: a lookup of the latest version by ``on``
        if join.max_age is not None:
            raise ConfigError(f"needs a valid time; source {other.name!r} has none (its rows are valid at any time)", file=file, key=f"{where}.max_age")
        if join.time is None:
            return
    if join.time is None:
        raise ConfigError(f"is required: source {other.name!r} has valid time {other.valid_time!r}", file=file, key=f"{where}.time")
    if join.time not in base.contract.column_names or base.contract.column(join.time).type not in TIME_TYPES:
        raise ConfigError(f"{join.time!r} must be a timestamp or date column of the base source {base.name!r}", file=file, key=f"{where}.time")


def provided_columns(definition: DatasetDefinition, sources: dict[str, SourceSpec]) -> dict[str, str]:
    """``{output column: the base or joined source it comes from}`` (label columns excluded)."""
    base = sources[definition.base].contract.column_names
    out = {c: definition.base for c in base}
    wanted = set(definition.features) if definition.features else set(definition.contract.column_names)
    wanted |= set(definition.transform_inputs)
    for i, join in enumerate(definition.as_of_joins):
        for col in sources[join.source].contract.column_names:
            if col in base or col not in wanted:
                continue
            if col in out:
                raise ConfigError(
                    f"column {col!r} comes from both {out[col]!r} and {join.source!r}; list 'features'", file=_file(definition), key=f"as_of_joins[{i}].source"
                )
            out[col] = join.source
    return out


def check_definition(
    definition: DatasetDefinition, sources: dict[str, SourceSpec], label_files: dict[str, LabelFile], labels: dict[str, dict[int, LabelVersion]] | None
) -> None:
    """Cross-check a definition against the sources and labels (see the module docstring)."""
    file = _file(definition)
    base = sources.get(definition.base)
    if base is None:
        key = "sources" if definition.legacy_sources else "base"
        raise ConfigError(f"unknown source {definition.base!r}; known: {sorted(sources)}", file=file, key=key)
    for i, join in enumerate(definition.as_of_joins):
        _check_join(definition, i, join, base, sources)
    for key, col in (
        ("observation_window.column", definition.observation_window.column),
        ("population_filter.column", definition.population_filter.column if definition.population_filter else None),
    ):
        if col is not None and col not in base.contract.column_names:
            raise ConfigError(f"{col!r} is not a column of the base source {base.name!r}", file=file, key=key)
    if base.contract.column(definition.observation_window.column).type not in TIME_TYPES:
        raise ConfigError("must be a date or timestamp column", file=file, key="observation_window.column")
    provided = provided_columns(definition, sources)
    for col in definition.features:
        if col in base.contract.column_names or col not in provided:
            raise ConfigError(f"{col!r} is not a column of a joined source (or is a base column)", file=file, key="features")
    _check_transforms(definition, provided)
    _check_label(definition, base, provided, label_files, labels)
    if definition.entity_column not in (*definition.contract.column_names, example_id_column(definition.contract)):
        raise ConfigError(f"{definition.entity_column!r} is not an output contract column", file=file, key="split_policy")


def _check_transforms(definition: DatasetDefinition, provided: dict[str, str]) -> None:
    """Every column a derived column or the aggregation reads comes from a source or an earlier derived column."""
    missing = [c for c in definition.transform_inputs if c not in provided]
    if missing:
        key = "derive" if any(c in d.multiply for d in definition.derive for c in missing) else "aggregate"
        raise ConfigError(f"column {missing[0]!r} comes from no source", file=_file(definition), key=key)
    if definition.aggregate is not None:  # after an aggregation only its group, bucket and measure columns exist
        lost = [c for c in definition.contract.column_names if c not in definition.aggregate.outputs]
        if lost:
            raise ConfigError(f"column {lost[0]!r} is not a group, bucket or measure column of the aggregation", file=_file(definition), key="contract.columns")


def _check_label(
    definition: DatasetDefinition,
    base: SourceSpec,
    provided: dict[str, str],
    label_files: dict[str, LabelFile],
    labels: dict[str, dict[int, LabelVersion]] | None,
) -> None:
    file = _file(definition)
    rest = [c for c in definition.contract.column_names if c not in provided and c not in definition.transform_outputs]
    if definition.label is None:
        if rest:
            raise ConfigError(f"column {rest[0]!r} comes from no source", file=file, key="contract.columns")
        return
    lf = label_files.get(definition.label.name)
    if lf is None:
        raise ConfigError(f"unknown label {definition.label.name!r}; known: {sorted(label_files)}", file=file, key="label.name")
    if labels is not None and definition.label.version not in labels.get(lf.name, {}):
        raise ConfigError(
            f"label {lf.name!r} has no version {definition.label.version}; registered: {sorted(labels.get(lf.name, {}))}", file=file, key="label.version"
        )
    missing = [c for c in rest if c not in lf.contract.column_names]
    if missing:
        raise ConfigError(f"column {missing[0]!r} comes from no source and not from label {lf.name!r}", file=file, key="contract.columns")
    for col in lf.contract.key:
        if col not in base.contract.column_names or col not in definition.contract.column_names:
            raise ConfigError(f"label key {col!r} must be a column of the base source and the output contract", file=file, key="label.name")
