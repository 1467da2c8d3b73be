"""`dsv split assign`: one identifier per stdin line in, one split name per stdout line out.

A line is an identifier (a string) without its LF or CRLF terminator; nothing
else is stripped. Input is read in blocks (1 MiB, about 100k short lines), so memory stays bounded
however long the stream; each block's names are written and flushed in order.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsv_platform.core.errors import InputError, SplitPolicyError
from dsv_platform.core.splits.hash_split import HashSplitPolicy, check_new_salt

BLOCK_BYTES = 1 << 20


def read_line_batches(stream: BinaryIO, block_bytes: int = BLOCK_BYTES) -> Iterator[list[bytes]]:
    """Lists of lines (terminator LF removed; CR is the caller's) of at most about ``block_bytes`` each."""
    carry = b""
    while block := stream.read(block_bytes):
        data = carry + block
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        yield data[:cut].split(b"\n")
    if carry:
        yield [carry]


def decode_lines(lines: list[bytes], first_line: int) -> pa.Array:
    """UTF-8 identifiers without a trailing CR; ``first_line`` (1-based) names a bad line."""
    try:
        text = pc.cast(pa.array(lines, pa.binary()), pa.string())
    except pa.ArrowInvalid as exc:
        for number, line in enumerate(lines, start=first_line):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as bad:
                raise InputError(f"stdin line {number} is not valid UTF-8 ({bad.reason} at byte {bad.start}): {line[:60]!r}") from exc
        raise
    has_cr = pc.ends_with(text, "\r")
    if pc.any(has_cr).as_py():
        text = pc.if_else(has_cr, pc.utf8_slice_codeunits(text, 0, -1), text)
    return text


def parse_modulus(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise SplitPolicyError(f"--modulus {text!r} must be a positive integer")
    return int(text)


def assign_stream(policy: HashSplitPolicy, source: BinaryIO, sink: BinaryIO, block_bytes: int = BLOCK_BYTES) -> int:
    """Write the split of every line of ``source`` to ``sink``; returns the number of lines."""
    names = np.array([name.encode("utf-8") + b"\n" for name in policy.names], dtype=object)
    uppers = np.array([r.upper for r in policy.ranges], dtype=np.int64)
    count = 0
    for lines in read_line_batches(source, block_bytes):
        buckets = policy.buckets(decode_lines(lines, count + 1))
        sink.write(b"".join(names[np.searchsorted(uppers, buckets, side="right")].tolist()))
        sink.flush()
        count += len(lines)
    return count


def _assign(args: Any) -> int:
    policy = HashSplitPolicy.from_bounds(check_new_salt(args.salt), args.splits, parse_modulus(args.modulus))
    assign_stream(policy, sys.stdin.buffer, sys.stdout.buffer)
    return 0


def register(subparsers: Any) -> None:
    split = subparsers.add_parser("split", help="split assignment (hash-split/1)")
    commands = split.add_subparsers(dest="split_command", metavar="SUBCOMMAND")
    commands.required = True
    assign = commands.add_parser(
        "assign",
        help="assign each stdin identifier (one a line) a split; prints one split name a line",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    assign.add_argument("--salt", required=True, help="the policy salt, e.g. fraud_v6")
    assign.add_argument("--splits", required=True, help="cumulative upper bounds, e.g. train=80,validation=90,test=100")
    assign.add_argument("--modulus", default="100", help="bucket modulus; the last bound must equal it")
    assign.set_defaults(handler=_assign)
