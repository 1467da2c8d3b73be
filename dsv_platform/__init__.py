"""dsv_platform: every model traceable to an immutable dataset realization.

Training code loads data by reference::

    import dsv_platform
    ds = dsv_platform.open_dataset("fraud_training_set:v6@production")

Everything else lives in ``core`` (pure domain), ``adapters`` (I/O), ``defs``
(Dagster) and ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["__version__", "open_dataset"]

__version__ = "0.1.0"

if TYPE_CHECKING:
    from dsv_platform.reader import open_dataset


def __getattr__(name: str) -> Any:
    # Imported lazily so `import dsv_platform.core...` stays light.
    if name == "open_dataset":
        from dsv_platform.reader import open_dataset

        return open_dataset
    raise AttributeError(name)
