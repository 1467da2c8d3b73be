"""Label versions: Python functions registered by name, described by a ``labels/<name>.yaml`` file.

A label file names the label, its contract (whose key joins the label to the
examples) and ``module``: an importable module exposing ``LABELS``, a
sequence of :class:`LabelFunction`. Each becomes a :class:`LabelVersion`
whose table is ``labels_<name>_v<version>``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsv_platform.core.config.source import contract_of
from dsv_platform.core.config_yaml import ConfigError, check_keys, need
from dsv_platform.core.contracts.contract import Contract

if TYPE_CHECKING:  # annotations only: loading the configuration needs no pyarrow
    import pyarrow as pa

LABEL_FILE_KEYS = frozenset({"name", "description", "module", "contract"})
LabelCompute = Callable[[Mapping[str, "pa.Table"]], "pa.Table"]


@dataclass(frozen=True)
class LabelFunction:
    """What a label module registers: version ``version`` of label ``name``, computed from ``inputs`` (source names)."""

    name: str
    version: int
    description: str
    inputs: tuple[str, ...]
    compute: LabelCompute = field(compare=False)


@dataclass(frozen=True)
class LabelVersion:
    """A registered label version with its contract; ``key`` joins it to the examples."""

    name: str
    version: int
    description: str
    contract: Contract
    key: tuple[str, ...]
    inputs: tuple[str, ...]
    compute: LabelCompute = field(compare=False)
    module: str = ""

    @property
    def table_name(self) -> str:
        return f"labels_{self.name}_v{self.version}"

    @property
    def ref(self) -> str:
        return f"{self.name}:v{self.version}"


@dataclass(frozen=True)
class LabelFile:
    """A parsed ``labels/<name>.yaml``."""

    name: str
    module: str
    contract: Contract
    file: Path
    description: str = ""


def parse_label_file(doc: Any, *, file: Path) -> LabelFile:
    doc = check_keys(doc, file=file, where=None, allowed=LABEL_FILE_KEYS, required=("name", "module", "contract"))
    name = need(doc, "name", str, file=file)
    if name != file.stem:
        raise ConfigError(f"the file of label {name!r} must be named {name}.yaml", file=file, key="name")
    contract = contract_of(need(doc, "contract", Mapping, file=file), file, where="contract")
    return LabelFile(name, need(doc, "module", str, file=file), contract, file, str(doc.get("description", "")))


def _functions(label: LabelFile) -> Sequence[Any]:
    try:
        module = importlib.import_module(label.module)
    except ImportError as exc:
        raise ConfigError(f"cannot import {label.module!r}: {exc}", file=label.file, key="module") from exc
    found = getattr(module, "LABELS", None)
    if not isinstance(found, (list, tuple)):
        raise ConfigError(f"module {label.module!r} exposes no LABELS list of LabelFunction", file=label.file, key="module")
    return found


def load_label_versions(label: LabelFile) -> dict[int, LabelVersion]:
    """Import ``label.module`` and return its versions of ``label.name`` by number."""
    versions: dict[int, LabelVersion] = {}
    for fn in _functions(label):
        if not isinstance(fn, LabelFunction):
            raise ConfigError(f"module {label.module!r}: LABELS holds {type(fn).__name__}, not LabelFunction", file=label.file, key="module")
        if fn.name != label.name:
            continue
        if fn.version in versions:
            raise ConfigError(f"module {label.module!r} registers {fn.name} v{fn.version} twice", file=label.file, key="module")
        versions[fn.version] = LabelVersion(fn.name, fn.version, fn.description, label.contract, label.contract.key, fn.inputs, fn.compute, label.module)
    if not versions:
        raise ConfigError(f"module {label.module!r} registers no version of label {label.name!r}", file=label.file, key="module")
    return versions
