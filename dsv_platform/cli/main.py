"""`dsv`: the platform's command line.

Each sub-command lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler``. Handlers return an exit
code. A :class:`DsvError` becomes a one-line message on stderr and its exit
code (resolution failures: 3 NOT_FOUND, 4 REDACTED, 5 EXPIRED, 6 CORRUPT,
7 ACCESS_DENIED; 9 configuration/environment, 10 unreachable service,
11 a file that cannot be read or written; other errors 2); never a traceback.
Anything else escaping a handler is a bug, still reported on one line (exit 70).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

from dsv_platform.core.errors import INTERNAL_ERROR_EXIT, DsvError, FileAccessError

# Modules that contribute sub-commands, in help order.
COMMAND_MODULES = (
    "dsv_platform.cli.hash_cmd",
    "dsv_platform.cli.split_cmd",
    "dsv_platform.cli.conformance_cmd",
    "dsv_platform.cli.registry_cmd",
    "dsv_platform.cli.ingest_cmd",
    "dsv_platform.cli.build_cmd",
    "dsv_platform.cli.demo_cmd",
    "dsv_platform.cli.lineage_cmd",
    "dsv_platform.cli.gc_cmd",
    "dsv_platform.cli.privacy_cmd",
    "dsv_platform.cli.reproduce_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dsv", description="dsv_platform: dataset versioning and reproducibility")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        code = args.handler(args)
    except DsvError as exc:
        message = str(exc).replace("\n", " ")
        print(f"dsv: error: {message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file the command touches cannot be read or written: name it, one line.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"dsv: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return FileAccessError.exit_code
    except Exception as exc:  # the boundary: a bug is still one line, never a traceback
        message = " ".join(str(exc).split())[:500]
        print(f"dsv: internal error ({type(exc).__name__}): {message}", file=sys.stderr)
        return INTERNAL_ERROR_EXIT
    return int(code or 0)


def run() -> None:
    """Console entry point: exit without native teardown.

    pyarrow's thread pools can abort the process ("terminate called without an
    active exception", apache/arrow#34314) while the interpreter finalizes; all
    output is flushed first, so skipping finalization loses nothing.
    """
    code = main()
    gc.collect()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
