"""`dsv conformance`: print, write or check the `dsv-canon/1` conformance vectors (``--joins``: the `as-of-join/1` ones)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dsv_platform.core.assembly.join_conformance import JOIN_FORMAT, build_join_vectors, check_join_vectors, dumps_join_vectors
from dsv_platform.core.errors import FailureKind, FileAccessError, InputError
from dsv_platform.core.identity.conformance import build_vectors, check_vectors, dumps_vectors
from dsv_platform.core.publication.failures import exit_code


def _conformance(args: argparse.Namespace) -> int:
    if args.check is not None:
        path = Path(args.check)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InputError(f"{path}: not a JSON document ({exc})") from exc
        joins = isinstance(doc, dict) and doc.get("format") == JOIN_FORMAT  # a document says which vectors it holds
        failures = check_join_vectors(doc) if joins else check_vectors(doc)
        if failures:
            print(f"{path}: {len(failures)} mismatch(es) with dsv_platform's {'assembly' if joins else 'encoder'}", file=sys.stderr)
            for failure in failures:
                print(failure)
            return exit_code(FailureKind.FAILED)
        print(f"{path}: all {len(doc['vectors'])} vectors agree")
        return 0
    text = dumps_join_vectors(build_join_vectors()) if args.joins else dumps_vectors(build_vectors())
    if args.write is not None:
        try:
            Path(args.write).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise FileAccessError(f"{args.write}: cannot write the vectors ({exc.strerror})") from exc
        return 0
    sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "conformance",
        help="conformance vectors for dsv-canon/1 and hash-split/1: print them, write them, or check another implementation's file",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--write", metavar="PATH", help="write the vectors JSON to PATH instead of stdout")
    mode.add_argument("--check", metavar="PATH", help="recompute every vector of PATH and list the mismatches (exit 1 if any); either kind of document")
    p.add_argument("--joins", action="store_true", help="print or write the point-in-time join vectors (as-of-join/1) instead")
    p.set_defaults(handler=_conformance)
