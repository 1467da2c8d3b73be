"""Type stub of the compiled row text encoder (rowtext.c); the extension is optional, see __init__.py."""

from collections.abc import Sequence

INT: int
BOOL: int
STRING: int
TEXT: int
BINARY: int
DECIMAL128: int
TIMESTAMP: int

class Buffer:
    """The encoded rows; exposes its bytes through the buffer protocol."""

    def __buffer__(self, flags: int, /) -> memoryview: ...
    def __release_buffer__(self, buffer: memoryview, /) -> None: ...

def encode(columns: Sequence[tuple[object, ...]], perm: object, start: int, count: int, ends: object = None, /) -> Buffer:
    """Canonical row text of rows ``start .. start + count`` (see rowtext.c); ``ends[r]``: the offset just past row r."""

def gather(texts: Sequence[object], seg_rows: int, ends: object, order: object, start: int, count: int, /) -> Buffer:
    """Rows ``order[start .. start + count]`` of a storage-order text cut in segments of ``seg_rows`` rows (rowtext.c)."""

def trim() -> None:
    """Free the pooled output buffers."""

def _set_prefetch_distance(values: int, text: int, /) -> tuple[int, int]:
    """Rows ahead whose values / text bytes are prefetched (tuning); returns the previous setting."""
