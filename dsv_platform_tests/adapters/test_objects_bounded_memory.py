"""Encrypted objects stream in bounded memory: a put and a read of an object 4x larger than the memory cap (RLIMIT_DATA).

The write and the reads run in a subprocess whose data segment is capped a little above what its
imports take; the object is four times that headroom. The same process then asks for the whole
object at once (``get``), which must fail with MemoryError: the cap binds, and the old envelope
(read whole, encrypt whole) could not have run under it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
OBJECT_MIB = 256
HEADROOM_MIB = 64

SCRIPT = r"""
import hashlib, json, resource, sys
from pathlib import Path

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.adapters.objects.key_store import LocalKeyStore
from dsv_platform.adapters.objects.local_store import LocalObjectStore

MiB = 1024 * 1024
root, mib, headroom = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) * MiB


def vm(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))


def blocks():
    block = hashlib.shake_256(b"bounded").digest(MiB)
    for i in range(mib):
        yield i.to_bytes(8, "big") + block[8:]


expected = hashlib.sha256()
with open(root / "source.bin", "wb") as out:
    for block in blocks():
        expected.update(block)
        out.write(block)
store = EncryptingObjectStore(LocalObjectStore(root / "objects"), LocalObjectStore(root / "objects" / "encrypted"), LocalKeyStore(root / "keys"))
store.spool_dir = str(root)
resource.setrlimit(resource.RLIMIT_DATA, (vm("VmData") + headroom, resource.RLIM_INFINITY))
result = {"put_chunks": store.put_chunks(blocks()), "put_file": store.put_file(root / "source.bin")}
result["size"] = store.size(result["put_file"])
store.get_file(result["put_file"], root / "read.bin")
with open(root / "read.bin", "rb") as f:
    result["get_file"] = hashlib.file_digest(f, "sha256").hexdigest()
h = hashlib.sha256()
with store.open(result["put_file"]) as stream:
    while chunk := stream.read(MiB):
        h.update(chunk)
result["open"] = h.hexdigest()
try:
    store.get(result["put_file"])
    result["whole_get"] = "fit"
except MemoryError:
    result["whole_get"] = "MemoryError"
result["expected"] = expected.hexdigest()
print(json.dumps(result))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmData from /proc")
def test_encrypted_put_and_get_stream_under_a_memory_cap(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), str(OBJECT_MIB), str(HEADROOM_MIB)], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    expected = result["expected"]
    assert result["put_chunks"] == result["put_file"] == result["get_file"] == result["open"] == expected
    assert result["size"] == OBJECT_MIB * MiB
    assert result["whole_get"] == "MemoryError", "the cap does not bind: holding the whole object fitted under it"
