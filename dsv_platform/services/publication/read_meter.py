"""Consumption health measured as a dataset handle reads (issue 27 item 3): one :class:`ReadMeter` per read.

A read is one pass of a :class:`~dsv_platform.services.publication.datasets.Dataset` over its objects. The meter
times it (seconds, and the time to its first object's bytes), counts objects, bytes and rows, and which object was
missing or did not hash (decrypt) to its name. On exit it hands the measure to the handle's sink (the registry's
``read_health`` table for a handle ``open_dataset`` made); a sink that fails is logged and never fails the read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType

from dsv_platform.adapters.registry.read_health import ReadMeasure
from dsv_platform.core.errors import ObjectErasedError, ObjectNotFoundError, ObjectVerificationError
from dsv_platform.core.publication.manifest import PartitionEntry

log = logging.getLogger(__name__)

ReadSink = Callable[[ReadMeasure], None]


class ReadMeter:
    """Times and counts one read; a context manager whose exit records it (``STOPPED``: the reader stopped early)."""

    def __init__(self, kind: str, sink: ReadSink | None, ref: str) -> None:
        self.measure = ReadMeasure(kind)
        self._sink, self._ref = sink, ref
        self._start = time.perf_counter()

    def __enter__(self) -> ReadMeter:
        self._start = time.perf_counter()
        return self

    @contextmanager
    def object(self, partition: PartitionEntry) -> Iterator[None]:
        """Around one object's fetch: a missing or corrupt object is counted (and named) before its error goes on."""
        m = self.measure
        try:
            yield
        except Exception as exc:
            cause = exc.__cause__ if exc.__cause__ is not None else exc
            kinds = ((ObjectNotFoundError, "MISSING"), (ObjectVerificationError, "CORRUPT"), (ObjectErasedError, "REDACTED"))
            m.outcome = next((kind for t, kind in kinds if isinstance(cause, t)), "FAILED")
            m.missing += int(m.outcome == "MISSING")
            m.corrupt += int(m.outcome == "CORRUPT")
            m.detail = {"partition": partition.key, "object": partition.object, "error": type(cause).__name__}
            raise

    def arrived(self, nbytes: int) -> None:
        m = self.measure
        if m.ttfb_s is None:
            m.ttfb_s = time.perf_counter() - self._start
        m.objects += 1
        m.bytes += nbytes

    def content_mismatch(self, partition: PartitionEntry) -> None:
        """An object that hashes to its name but whose rows do not hash to the manifest's leaf: corrupt too."""
        m = self.measure
        m.outcome, m.corrupt = "CORRUPT", m.corrupt + 1
        m.detail = {"partition": partition.key, "object": partition.object, "error": "content hash mismatch"}

    def parsed(self, rows: int) -> None:
        self.measure.rows += rows

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        m = self.measure
        m.seconds = time.perf_counter() - self._start
        if typ is GeneratorExit:
            m.outcome = "STOPPED"
        elif exc is not None and m.outcome == "OK":
            m.outcome = "FAILED"
        if self._sink is None:
            return
        try:
            self._sink(m)
        except Exception as e:  # recording is best effort: the read's own outcome stands
            log.warning("%s: the health of a %s read was not recorded (%s: %s)", self._ref, m.kind, type(e).__name__, e)
