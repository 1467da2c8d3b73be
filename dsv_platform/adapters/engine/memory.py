"""Giving memory back between the steps of a build: the engine's pool shrunk, and allocators' free pages returned.

A build's peak RSS is the engine's pool plus the partitions being prepared plus what allocators keep after a free.
glibc keeps freed memory in per-thread arenas (a build frees a partition's texts on one thread and allocates the next
on another), and pyarrow's pool keeps its own; :func:`release_free_memory` returns both to the system. Past the
relational work the engine only scans one partition at a time, so :func:`shrink_pool` lowers its limit for the rest.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import re
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from dsv_platform.adapters.engine.duckdb_engine import Connection

MIN_POOL = 64 << 20
_UNITS = {"bytes": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}


@functools.cache
def _trim() -> ctypes._NamedFuncPointer | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim
        return None


def release_free_memory() -> None:
    """Return the free pages pyarrow's pool and glibc's arenas hold to the system (the live data is untouched)."""
    pa.default_memory_pool().release_unused()
    trim = _trim()
    if trim is not None:
        trim(0)


def pool_limit(con: Connection) -> int:
    """The engine's memory limit in bytes."""
    found = con.execute("SELECT current_setting('memory_limit')").fetchone()
    match = re.fullmatch(r"([\d.]+)\s*([A-Za-z]+)", str(found[0] if found else "").strip())
    if match is None or match.group(2) not in _UNITS:
        raise ValueError(f"unreadable memory_limit {found!r}")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def shrink_pool(con: Connection, fraction: int = 4) -> None:
    """Lower the engine's memory limit to ``1/fraction`` of its configured one (at least 64 MiB): it evicts cached blocks.

    Idempotent: the configured limit is remembered in the connection, so a second call does not shrink further.
    """
    found = con.execute("SELECT getvariable('dsv_pool_configured')").fetchone()
    configured = int(found[0]) if found and found[0] is not None else pool_limit(con)
    con.execute(f"SET VARIABLE dsv_pool_configured = {configured}")
    con.execute(f"SET memory_limit = '{max(MIN_POOL, configured // fraction) >> 20}MiB'")


__all__ = ["pool_limit", "release_free_memory", "shrink_pool"]
