"""`dsv`: the platform's command line.

Each sub-command lives in its own module with a ``register(subparsers)``
function that adds its parser and sets ``handler``. Handlers return an exit
code. A :class:`DsvError` becomes a one-line message on stderr and the exit code
of its kind, never a traceback; an OSError is FILE_ACCESS, and anything else
escaping a handler is a bug (INTERNAL), still reported on one line. Every code is
a row of the failure table (core/publication/failures.py), which ``dsv --help``
lists; this module keeps no copy of it.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib
import os
import sys
import unicodedata
from collections.abc import Sequence

from dsv_platform.core.errors import DsvError, FailureKind, is_disk_full
from dsv_platform.core.publication import failures

# Modules that contribute sub-commands, in help order.
COMMAND_MODULES = (
    "dsv_platform.cli.hash_cmd",
    "dsv_platform.cli.contract_cmd",
    "dsv_platform.cli.split_cmd",
    "dsv_platform.cli.conformance_cmd",
    "dsv_platform.cli.registry_cmd",
    "dsv_platform.cli.approve_cmd",
    "dsv_platform.cli.ingest_cmd",
    "dsv_platform.cli.build_cmd",
    "dsv_platform.cli.demo_cmd",
    "dsv_platform.cli.lineage_cmd",
    "dsv_platform.cli.diff_cmd",
    "dsv_platform.cli.schema_cmd",
    "dsv_platform.cli.consumers_cmd",
    "dsv_platform.cli.gc_cmd",
    "dsv_platform.cli.privacy_cmd",
    "dsv_platform.cli.reproduce_cmd",
    "dsv_platform.cli.model_cmd",
    "dsv_platform.cli.deploy_cmd",
    "dsv_platform.cli.table_location_cmd",
    "dsv_platform.cli.staging_cmd",
    "dsv_platform.cli.quarantine_cmd",
    "dsv_platform.cli.identity_cmd",
    "dsv_platform.cli.grants_cmd",
    "dsv_platform.cli.audit_cmd",
    "dsv_platform.cli.home_cmd",
    "dsv_platform.cli.keys_cmd",
    "dsv_platform.cli.card_cmd",
)

# The static index: command -> (module registering it, its one-line help), in help order.
# `dsv --help` lists it without importing any command module; only the chosen command's module
# is imported (start-up: the command modules pull in pyiceberg, pyarrow, pandas, dagster).
# dsv_platform_tests/cli/test_startup.py checks it equals what COMMAND_MODULES register.
_HASH, _REG, _REPRO = "dsv_platform.cli.hash_cmd", "dsv_platform.cli.registry_cmd", "dsv_platform.cli.reproduce_cmd"
COMMANDS: dict[str, tuple[str, str]] = {
    "hash": (_HASH, "content hash, schema hash and partition hashes of Parquet data"),
    "canonical": (_HASH, "write the canonical row text to stdout (per partition, in key order); sha256sum of one partition's text is its hash"),
    "contract": ("dsv_platform.cli.contract_cmd", "contract tools: check a contract's semantic rules on Parquet data"),
    "split": ("dsv_platform.cli.split_cmd", "split assignment (hash-split/1)"),
    "conformance": (
        "dsv_platform.cli.conformance_cmd",
        "conformance vectors for dsv-canon/1 and hash-split/1: print them, write them, or check another implementation's file",
    ),
    "resolve": (_REG, "resolve a reference to exactly one realization, or a typed failure"),
    "versions": (_REG, "realizations of a dataset with their states, newest first"),
    "alias": (_REG, "move or inspect an alias"),
    "verify": (_REG, "re-hash every object and the content, show who built, published, approved it and check its signature (6, 13)"),
    "approve": ("dsv_platform.cli.approve_cmd", "approve a PUBLISHED realization: it becomes ELIGIBLE (protected aliases may point only there)"),
    "revoke": ("dsv_platform.cli.approve_cmd", "revoke an approval: ELIGIBLE -> PUBLISHED; refused while a protected alias points at it"),
    "ingest": ("dsv_platform.cli.ingest_cmd", "land batch files of a source and load its canonical table (one Dagster run)"),
    "build": ("dsv_platform.cli.build_cmd", "materialize a dataset's snapshot and splits (one Dagster run) and print its identity"),
    "demo": ("dsv_platform.cli.demo_cmd", "run the configuration's demo (the fraud example: --days N --rows-per-day N)"),
    "lineage": ("dsv_platform.cli.lineage_cmd", "provenance of a model, report or realization; --impact: everything depending on a node"),
    "diff": (
        "dsv_platform.cli.diff_cmd",
        "rows added/removed/changed, partitions, columns, label flips and split moves between two realizations; or two model runs' manifests",
    ),
    "schema": ("dsv_platform.cli.schema_cmd", "schema evolution: classify the changes between two contracts"),
    "consumers": ("dsv_platform.cli.consumers_cmd", "register who reads a definition and which columns"),
    "gc": ("dsv_platform.cli.gc_cmd", "reachability garbage collection: plan, apply (dry run by default), why"),
    "retention": ("dsv_platform.cli.gc_cmd", "retention roots: what GC must keep, who asked, until when"),
    "privacy": ("dsv_platform.cli.privacy_cmd", "privacy deletion of a data subject"),
    "reproduce": (_REPRO, "audit: reproduce an artifact (seven steps), a realization or a model run from its manifest"),
    "rehearse": (_REPRO, "dry reconstruction of retained models and artifacts (--full: in full); prints the fraction"),
    "promote": (_REPRO, "move a model's training set to the production alias, behind the promotion gate"),
    "status": (_REPRO, "freshness, publication lag, build health and consumption per dataset definition"),
    "model": ("dsv_platform.cli.model_cmd", "the model registry: versions (run manifest hashes), approvals, aliases"),
    "deploy": ("dsv_platform.cli.deploy_cmd", "record that a model version serves on a target (a lineage node); list deployments"),
    "table-location": (
        "dsv_platform.cli.table_location_cmd",
        "a canonical table's Iceberg metadata file and the DuckDB query reading it (docs/interop.md)",
    ),
    "staging": ("dsv_platform.cli.staging_cmd", "the staging branches blocked loads left (wap-*): list them, discard one (operator)"),
    "quarantine": (
        "dsv_platform.cli.quarantine_cmd",
        "quarantine a realization or a raw batch and every descendant (operator); --list shows quarantines",
    ),
    "release": ("dsv_platform.cli.quarantine_cmd", "release a quarantine: one operator requests it, another identity approves it (--approve)"),
    "identity": ("dsv_platform.cli.identity_cmd", "identities and their Ed25519 keys: create, list, show (the current one)"),
    "trust": ("dsv_platform.cli.identity_cmd", "the trust root: certify every key and grant of a registry from before certificates (the root's holder)"),
    "init": ("dsv_platform.cli.identity_cmd", "set up the home: bootstrap admin, or --strict: explicit grants only, --admin NAME holds operator"),
    "grants": ("dsv_platform.cli.grants_cmd", "grant or remove a role (operator; audited), or list the grants"),
    "audit": (
        "dsv_platform.cli.audit_cmd",
        "the audit log: grants, publications, approvals, alias moves, quarantines, deletions, GC; --verify checks the chain",
    ),
    "home": ("dsv_platform.cli.home_cmd", "the embedded home: relocate a moved or copied home's canonical tables (docs/reliability.md)"),
    "keys": ("dsv_platform.cli.keys_cmd", "the crypto-erasure key store: copy it to another one (a key folder to PostgreSQL), verified"),
    "card": ("dsv_platform.cli.card_cmd", "the dataset card of a realization: purpose, composition, collection, quality, privacy, uses, maintenance"),
}


def build_parser(command: str | None = None, *, load_all: bool = False) -> argparse.ArgumentParser:
    """The ``dsv`` parser: every command listed from :data:`COMMANDS`; real sub-parsers only for
    ``command``'s module (or every module with ``load_all``), the others are help-only placeholders.

    Made once per module in a process (parsing does not change a parser): ``main`` called again, as the in-process
    runner does, does not rebuild the same parser."""
    return _parser(COMMANDS[command][0] if command in COMMANDS else None, load_all)


@functools.cache
def _parser(chosen: str | None, load_all: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsv",
        description="dsv_platform: dataset versioning and reproducibility",
        epilog=f"exit codes: 0 success, {failures.summary()} (README: Errors and exit codes)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    registered: set[str] = set()
    for name, (module, help_text) in COMMANDS.items():
        if module in registered:
            continue
        if load_all or module == chosen:
            importlib.import_module(module).register(sub)  # adds all of the module's commands, in index order
            registered.add(module)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The sub-command argparse will pick: the first argument that is not an option (``dsv`` has only -h)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if not arg.startswith("-"):
            return arg
    return None


def _parse(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace, list[str]]:
    parser = build_parser(_command_of(argv))
    args, extra = parser.parse_known_args(argv)
    if not hasattr(args, "handler"):  # a help-only placeholder was picked: build that command for real
        parser = build_parser(args.command)
        args, extra = parser.parse_known_args(argv)
    return parser, args, extra


def printable(text: str) -> str:
    """``text`` with control and format characters escaped (``\\x1b``, ``\\u202e``): hostile bytes from a file or
    a name never reach the terminal raw (escape sequences, bidirectional overrides)."""
    return "".join(ch if ch == " " or unicodedata.category(ch)[0] not in "CZ" else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    return ch.encode("unicode_escape").decode("ascii")


def main(argv: Sequence[str] | None = None) -> int:
    parser, args, extra = _parse(list(sys.argv[1:] if argv is None else argv))
    if extra and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.extra = extra
    try:
        code = args.handler(args)
    except DsvError as exc:
        message = printable(str(exc).replace("\n", " "))
        print(f"dsv: error: {message}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # A file the command touches cannot be read or written: name it, one line.
        where = f"{exc.filename}: " if exc.filename else ""
        if is_disk_full(exc):  # ENOSPC: the disk is full, an environment fault
            print(printable(f"dsv: error: {where}the disk is full (no space left on device); free space and retry"), file=sys.stderr)
            return failures.exit_code(FailureKind.ENVIRONMENT)
        print(printable(f"dsv: error: {where}{exc.strerror or exc}"), file=sys.stderr)
        return failures.exit_code(FailureKind.FILE_ACCESS)
    except Exception as exc:  # the boundary: a bug is still one line, never a traceback
        message = printable(" ".join(str(exc).split())[:500])
        if is_disk_full(exc):  # SQLite's "database or disk is full", an ENOSPC below a library
            print(f"dsv: error: the disk is full ({message[:300]}); free space and retry", file=sys.stderr)
            return failures.exit_code(FailureKind.ENVIRONMENT)
        print(f"dsv: internal error ({type(exc).__name__}): {message}", file=sys.stderr)
        return failures.exit_code(FailureKind.INTERNAL)
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
