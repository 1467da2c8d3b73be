"""dsv_platform: every model traceable to an immutable dataset realization.

The public entry points for training code live here; everything else is in
``core`` (pure domain), ``adapters`` (I/O), ``defs`` (Dagster) and ``cli``.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
