"""dsv_platform: every model traceable to an immutable dataset realization.

Training code loads data by reference::

    import dsv_platform
    ds = dsv_platform.open_dataset("fraud_training_set:v6@production", purpose="training")

Everything else lives in ``core`` (pure domain), ``adapters`` (I/O),
``services`` (use cases over a ``bootstrap.Platform``), ``defs`` (Dagster)
and ``cli``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["__version__", "open_dataset"]

__version__ = "0.1.0"

if TYPE_CHECKING:
    from dsv_platform.services.publication.datasets import Dataset
    from dsv_platform.settings import Settings


def open_dataset(ref: str, *, settings: Settings | None = None, actor: str | None = None, purpose: str | None = None) -> Dataset:
    """Open ``ref`` on the platform the ``DSV_*`` environment (or ``settings``) names.

    ``purpose`` is why you read (docs/trust.md): the identity needs a consumer grant for it.
    The handle keeps its platform open; ``ds.close()`` (or ``with``) releases it.
    Imports are deferred so ``import dsv_platform.core...`` stays light.
    """
    from dsv_platform.bootstrap import build_platform
    from dsv_platform.services.publication import datasets
    from dsv_platform.settings import load_settings

    platform = build_platform(settings or load_settings())
    try:
        ds = datasets.open_dataset(platform, ref, actor=actor, purpose=purpose)
    except BaseException:
        platform.close()
        raise
    ds.owner = platform
    return ds

