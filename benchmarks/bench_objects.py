"""Encrypted object put/get of one large object: MB/s and peak RSS, each operation in a fresh process.

``python benchmarks/bench_objects.py [--mib 1024] [--dir FOLDER]`` (``PYTHONPATH`` picks the code measured): writes a source file of
pseudo-random bytes, then times ``put_file`` into an EncryptingObjectStore over local folders and
a streaming read back into a file (``get_file``, or ``open`` where the store has no ``get_file``),
and the same two through the plain local store for reference. Prints one JSON line per operation.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MiB = 1024 * 1024


def _store(root: Path, encrypted: bool):  # type: ignore[no-untyped-def]
    from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
    from dsv_platform.adapters.objects.key_store import LocalKeyStore
    from dsv_platform.adapters.objects.local_store import LocalObjectStore

    inner = LocalObjectStore(root / "objects")
    if not encrypted:
        return inner
    return EncryptingObjectStore(inner, LocalObjectStore(root / "objects" / "encrypted"), LocalKeyStore(root / "keys"))


def _child(op: str, root: Path, source: Path, digest: str, encrypted: bool) -> dict[str, object]:
    store = _store(root, encrypted)
    start = time.perf_counter()
    if op == "put":
        got = store.put_file(source)
    else:
        out = root / "read-back.bin"
        if hasattr(store, "get_file"):
            store.get_file(digest, out)
        else:
            with store.open(digest) as stream, open(out, "wb") as sink:
                while chunk := stream.read(8 * MiB):
                    sink.write(chunk)
        with open(out, "rb") as f:
            got = hashlib.file_digest(f, "sha256").hexdigest()
        out.unlink()
    seconds = time.perf_counter() - start
    assert got == digest, (got, digest)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime
    return {"op": op, "encrypted": encrypted, "seconds": round(seconds, 2), "cpu_s": round(cpu, 2), "peak_rss_mib": round(peak / MiB)}


def _source(path: Path, mib: int) -> str:
    h = hashlib.sha256()
    block = hashlib.shake_256(b"bench_objects").digest(MiB)
    with open(path, "wb") as out:
        for i in range(mib):
            chunk = i.to_bytes(8, "big") + block[8:]
            h.update(chunk)
            out.write(chunk)
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        op, root, source, digest = args.child
        print(json.dumps(_child(op, Path(root), Path(source), digest, "plain" not in root)))
        return
    work = Path(tempfile.mkdtemp(prefix="bench-objects-", dir=args.dir))
    try:
        source = work / "source.bin"
        digest = _source(source, args.mib)
        for kind in ("encrypted", "plain"):
            root = work / kind
            for op in ("put", "get"):
                command = [sys.executable, str(Path(__file__).resolve()), "--child", op, str(root), str(source), digest]
                line = subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
                result = json.loads(line)
                result["mb_per_s"] = round(args.mib * MiB / 1e6 / result["seconds"], 1)
                print(json.dumps(result), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
