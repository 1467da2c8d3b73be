"""Optional compiled helpers (built by setuptools at install; see rowtext.c).

``available`` is False when the extension was not built (no compiler at
install time); callers then use the pure numpy/Arrow path, which stays the
reference implementation.
"""

from __future__ import annotations

try:
    from dsv_platform._native import _rowtext
except ImportError:  # not built: the pure path is used
    _rowtext = None  # type: ignore[assignment]

available: bool = _rowtext is not None

if _rowtext is not None:
    encode = _rowtext.encode
    gather = _rowtext.gather  # whole rows of a storage-order text, in key order
    trim = _rowtext.trim  # frees the few output buffers kept for reuse
    INT, BOOL, STRING, TEXT, BINARY, DECIMAL128, TIMESTAMP = (
        _rowtext.INT,
        _rowtext.BOOL,
        _rowtext.STRING,
        _rowtext.TEXT,
        _rowtext.BINARY,
        _rowtext.DECIMAL128,
        _rowtext.TIMESTAMP,
    )

__all__ = ["available"]
