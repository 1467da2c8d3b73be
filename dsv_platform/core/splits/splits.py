"""Split policies and their assignment (CANONICAL-ENCODING.md, `hash-split/1`), re-exported from one place.

Every policy is a frozen value with a canonical JSON document whose SHA-256 is its
``policy_hash``; the document goes into the manifest. Each policy lives in its own module
(hash_split, group_split, time_split, seeded_random); their protocol, the registry by name
and :func:`assign` in :mod:`dsv_platform.core.splits.policy`; shared ranges and constants in
:mod:`dsv_platform.core.splits.split_common`.

Details: docs/hashing.md
"""

from __future__ import annotations

from dsv_platform.core.splits.group_split import GroupSplitPolicy
from dsv_platform.core.splits.hash_split import (
    BATCH_ROWS,
    HashSplitPolicy,
    as_identifier_array,
    identifier_bytes,
)
from dsv_platform.core.splits.policy import SplitPolicy, assign, policy_from_document
from dsv_platform.core.splits.seeded_random import SeededRandomSplitPolicy
from dsv_platform.core.splits.split_common import (
    ALGORITHM,
    GROUP_SPLIT,
    HASH_SPLIT,
    IDENTIFIER_ENCODING,
    MAX_MODULUS,
    SEEDED_RANDOM,
    TIME_SPLIT,
    SplitAssignment,
    SplitName,
    SplitRange,
    parse_bounds,
    parse_utc,
    utc_text,
)
from dsv_platform.core.splits.time_split import TimeSplitPolicy

__all__ = [
    "ALGORITHM",
    "BATCH_ROWS",
    "GROUP_SPLIT",
    "HASH_SPLIT",
    "IDENTIFIER_ENCODING",
    "MAX_MODULUS",
    "SEEDED_RANDOM",
    "TIME_SPLIT",
    "GroupSplitPolicy",
    "HashSplitPolicy",
    "SeededRandomSplitPolicy",
    "SplitAssignment",
    "SplitName",
    "SplitPolicy",
    "SplitRange",
    "TimeSplitPolicy",
    "as_identifier_array",
    "assign",
    "identifier_bytes",
    "parse_bounds",
    "parse_utc",
    "policy_from_document",
    "utc_text",
]
