"""What the multiprocess executor's fork server imports once, so that no forked step imports it again.

Each step of a launched run is a process of its own; spawned, it spent seconds importing Dagster and the platform
before its first line of work. Forked from a server that imported this module (``executor.FORKSERVER``), it starts
with all of it loaded: the code location (the Definitions), the instance storage every step opens from its ref, and
what the platform imports only when a step first needs it (the Iceberg SQL catalog).
"""

import contextlib

import dagster._core.storage.sqlite_storage  # noqa: F401

import dsv_platform.adapters.iceberg.sql_catalog
import dsv_platform.definitions  # noqa: F401

with contextlib.suppress(ImportError):  # a production instance's storage (the deploy extra)
    import dagster_postgres  # noqa: F401
