"""``hash-split/1``: the salted SHA-256 bucket policy and its vectorized assignment.

See :mod:`dsv_platform.core.splits.hash_split` (this module) and docs/hashing.md for the formula. Messages are built with Arrow
string kernels, only non-ASCII identifiers are NFC-normalized in Python, one
SHA-256 per identifier runs in a tight ``map`` (CPython's built-in SHA-256,
``hashlib`` as fallback), and digests are reduced modulo the modulus with numpy.
"""

from __future__ import annotations

import hashlib
import importlib
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dsv_platform.core import canonical_json
from dsv_platform.core.errors import SplitPolicyError
from dsv_platform.core.splits.split_common import (
    ALGORITHM,
    HASH_SPLIT,
    IDENTIFIER_ENCODING,
    CheckTally,
    ColumnNeed,
    PolicyCheck,
    SplitAssignment,
    SplitRange,
    check_ranges,
    config_fields,
    config_key,
    config_text,
    document_fields,
    is_int,
    parse_bounds,
)

if TYPE_CHECKING:  # imported where used: loading a split policy (`dsv resolve`) needs neither numpy nor pyarrow
    import numpy as np
    import pyarrow as pa

BATCH_ROWS = 1 << 18


def _load_sha256() -> Callable[[bytes], Any]:
    for module in ("_sha256", "_sha2"):  # CPython 3.11 / 3.12+ built-in implementations
        try:
            ctor: Callable[[bytes], Any] = importlib.import_module(module).sha256
        except (ImportError, AttributeError):
            continue
        if ctor(b"abc").digest() == hashlib.sha256(b"abc").digest():
            return ctor
    return hashlib.sha256


_SHA256 = _load_sha256()
_DIGEST: Callable[[Any], bytes] = type(_SHA256(b"")).digest


def check_new_salt(salt: str) -> str:
    """A salt for a new policy: it may not contain the separator ``:`` (``a:b`` + ``c`` would hash like ``a`` + ``b:c``).

    Stored policies keep loading as they are (the encoding is unchanged); only new salts from users are refused.
    """
    if ":" in salt:
        raise SplitPolicyError(f"salt {salt!r} contains ':', the separator between salt and identifier; choose a salt without ':'")
    return salt


def cumulative_parts(ranges: tuple[SplitRange, ...]) -> dict[str, int]:
    """Each range's width: the buckets of a split (cumulative bounds back to shares)."""
    lowers = [0] + [r.upper for r in ranges[:-1]]
    return {r.name: r.upper - low for r, low in zip(ranges, lowers, strict=True)}


def hash_from_config(raw: Mapping[str, Any], file: str | Path) -> HashSplitPolicy:
    """``salt``, ``bounds`` and ``modulus`` (default 100) of a configuration's short form; a new salt may not contain ':'."""
    salt = config_text(raw, "salt", file=file)
    with config_key(file, "salt"):
        check_new_salt(salt)
    modulus = raw.get("modulus", 100)
    with config_key(file, "modulus"):
        if not is_int(modulus):
            raise SplitPolicyError(f"modulus {modulus!r} must be an integer")
    with config_key(file, "bounds"):
        return HashSplitPolicy.from_bounds(salt, config_text(raw, "bounds", file=file), modulus)


@dataclass(frozen=True)
class HashSplitPolicy:
    """``hash-split/1``: salted SHA-256 bucket of the identifier, named by cumulative bounds.

    It records no column: it assigns the identifier column it is given (a dataset's example id).
    """

    salt: str
    ranges: tuple[SplitRange, ...]
    modulus: int = 100

    policy_name: ClassVar[str] = HASH_SPLIT
    needs: ClassVar[ColumnNeed] = ColumnNeed.IDENTIFIER
    column_key: ClassVar[str | None] = None
    assigns_buckets: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.salt, str) or not self.salt:
            raise SplitPolicyError(f"salt {self.salt!r} must be a non-empty string")
        object.__setattr__(self, "ranges", tuple(self.ranges))
        check_ranges(self.ranges, self.modulus)

    @classmethod
    def from_bounds(cls, salt: str, bounds: str | Mapping[str, int], modulus: int = 100) -> HashSplitPolicy:
        """From ``"train=80,validation=90,test=100"`` or an ordered mapping name -> upper bound."""
        ranges = parse_bounds(bounds) if isinstance(bounds, str) else tuple(SplitRange(k, v) for k, v in bounds.items())
        return cls(salt, ranges, modulus)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.name for r in self.ranges)

    def to_document(self) -> dict[str, Any]:
        return {
            "policy": HASH_SPLIT,
            "algorithm": ALGORITHM,
            "identifier_encoding": IDENTIFIER_ENCODING,
            "salt": self.salt,
            "modulus": self.modulus,
            "splits": [{"name": r.name, "upper": r.upper} for r in self.ranges],
        }

    @classmethod
    def from_document(cls, doc: Any) -> HashSplitPolicy:
        d = document_fields(doc, HASH_SPLIT, {"algorithm", "identifier_encoding", "salt", "modulus", "splits"})
        if d["algorithm"] != ALGORITHM or d["identifier_encoding"] != IDENTIFIER_ENCODING:
            raise SplitPolicyError(f"unsupported algorithm/encoding {d['algorithm']!r}/{d['identifier_encoding']!r} in {HASH_SPLIT}")
        try:
            ranges = tuple(SplitRange(s["name"], s["upper"]) for s in d["splits"])
        except (KeyError, TypeError) as exc:
            raise SplitPolicyError(f"{HASH_SPLIT} splits {d['splits']!r} must be a list of {{name, upper}}") from exc
        return cls(d["salt"], ranges, d["modulus"])

    @classmethod
    def from_config(cls, raw: Mapping[str, Any], *, identifier: str, file: str | Path) -> HashSplitPolicy:
        """``{policy, salt, bounds, modulus?}``, or the full document (it has ``splits``)."""
        if "splits" in raw or "algorithm" in raw:
            with config_key(file, ""):
                return cls.from_document(raw)
        return hash_from_config(config_fields(raw, file=file, allowed={"salt", "bounds", "modulus"}, required={"salt", "bounds"}), file)

    @property
    def policy_hash(self) -> str:
        return canonical_json.sha256_hex(self.to_document())

    @property
    def column(self) -> str | None:
        return None

    @property
    def grouped_by(self) -> str | None:
        return None

    def input_column(self, id_column: str | None) -> str | None:
        if id_column is None:
            raise SplitPolicyError(f"{HASH_SPLIT} needs an identifier column (id_column)")
        return id_column

    def expected_parts(self) -> dict[str, int] | None:
        return cumulative_parts(self.ranges)

    def checks(self, assignment: pa.Table, split_column: str = "split") -> tuple[PolicyCheck, ...]:
        return ()

    def check_tallies(self, split_column: str = "split") -> tuple[CheckTally, ...]:
        return ()

    def bucket_of(self, identifier: str | int) -> int:
        """The bucket of one identifier, straight from the spec (the reference for the vector path)."""
        message = self.salt.encode("utf-8") + b":" + identifier_bytes(identifier)
        return int.from_bytes(hashlib.sha256(message).digest(), "big") % self.modulus

    def split_of(self, identifier: str | int) -> str:
        bucket = self.bucket_of(identifier)
        return next(r.name for r in self.ranges if bucket < r.upper)

    def buckets(self, values: Any) -> np.ndarray:
        """Bucket numbers (int64) of an Arrow array/chunked array, numpy array or sequence of identifiers."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = as_identifier_array(values)
        if pa.types.is_dictionary(arr.type):
            if arr.null_count:
                raise SplitPolicyError(f"identifier at row {_first_null(arr)} is null; identifiers must be strings or integers")
            uniques = self.buckets(arr.dictionary)
            indices: np.ndarray = np.asarray(arr.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            return uniques.take(indices)
        out = np.empty(len(arr), dtype=np.int64)
        prefix, nothing = pa.scalar(self.salt + ":", pa.large_string()), pa.scalar("", pa.large_string())
        for start in range(0, len(arr), BATCH_ROWS):
            text = _identifier_text(arr.slice(start, BATCH_ROWS), start)
            messages = pc.binary_join_element_wise(prefix, text, nothing).cast(pa.large_binary())
            digests = b"".join(map(_DIGEST, map(_SHA256, messages.to_numpy(zero_copy_only=False))))
            out[start : start + len(text)] = _reduce_digests(digests, self.modulus)
        return out

    def splits_of_buckets(self, buckets: np.ndarray) -> pa.DictionaryArray:
        import numpy as np
        import pyarrow as pa

        uppers = np.array([r.upper for r in self.ranges], dtype=np.int64)
        indices = np.searchsorted(uppers, buckets, side="right").astype(np.int32)
        return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(self.names, pa.string()))

    def assign_values(self, values: Any) -> SplitAssignment:
        import pyarrow as pa

        buckets = self.buckets(values)
        return SplitAssignment(self.splits_of_buckets(buckets), pa.array(buckets, pa.int64()))


def identifier_bytes(identifier: object) -> bytes:
    """``hash-split/1`` identifier bytes: NFC UTF-8 for strings, base-10 ASCII for integers."""
    if isinstance(identifier, str):
        return unicodedata.normalize("NFC", identifier).encode("utf-8")
    if is_int(identifier):
        return str(identifier).encode("ascii")
    raise SplitPolicyError(f"identifier {identifier!r} is a {type(identifier).__name__}; hash-split/1 identifiers must be strings or integers")


def _first_null(arr: pa.Array) -> int:
    import numpy as np

    return int(np.flatnonzero(np.asarray(arr.is_null()))[0])


def as_identifier_array(values: Any) -> pa.Array:
    import pyarrow as pa

    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if isinstance(values, pa.Array):
        return values
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError):
        return pa.array([identifier_bytes(v).decode("utf-8") for v in _iterate(values)], pa.large_string())


def _iterate(values: Any) -> Iterable[Any]:
    import numpy as np

    if isinstance(values, np.ndarray):
        items: list[Any] = values.tolist()
        return items
    iterable: Iterable[Any] = values
    return iterable


def _identifier_text(arr: pa.Array, offset: int) -> pa.Array:
    """Identifier texts (large_string, NFC) of one batch; ``offset`` is the batch's first row, for errors."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if arr.null_count:
        raise SplitPolicyError(f"identifier at row {offset + _first_null(arr)} is null; identifiers must be strings or integers")
    if pa.types.is_integer(arr.type):
        return pc.cast(arr, pa.large_string())
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_string_view(arr.type)):
        first = arr[0].as_py() if len(arr) else None
        raise SplitPolicyError(f"identifiers of type {arr.type} (first value {first!r}) are not strings or integers; hash-split/1 accepts only those")
    text = pc.cast(arr, pa.large_string())
    non_ascii = pc.invert(pc.string_is_ascii(text))
    if pc.any(non_ascii).as_py():
        originals = text.filter(non_ascii).to_pylist()
        normalized = [unicodedata.normalize("NFC", s) for s in originals]
        if normalized != originals:
            text = pc.replace_with_mask(text, non_ascii, pa.array(normalized, pa.large_string()))
    return text


def _reduce_digests(digests: bytes, modulus: int) -> np.ndarray:
    """Each 32-byte big-endian digest modulo ``modulus`` (<= 2**31), Horner's rule over 64-bit words."""
    import numpy as np

    words = np.frombuffer(digests, dtype=">u8").reshape(-1, 4).astype(np.uint64)
    m, radix = np.uint64(modulus), np.uint64(pow(2, 64, modulus))
    acc = words[:, 0] % m
    for j in range(1, 4):
        acc = (acc * radix + words[:, j] % m) % m
    return acc.astype(np.int64)
