"""A realization build killed mid-write (run as a real subprocess by test_privacy_every_copy.py).

    python -m dsv_platform_tests.scenarios.privacy_build_worker HOME MARKER

Builds fraud_training_set v6 on the embedded default under HOME; right after
the first part is staged it writes MARKER and sleeps, so the test can SIGKILL
it with the part staged and nothing promoted, sealed or published.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from dsv_platform.adapters.objects.encrypted_store import EncryptingObjectStore
from dsv_platform.bootstrap import build_platform
from dsv_platform.services.publication.realization import build_realization
from dsv_platform.settings import load_settings
from dsv_platform_tests.scenarios.support import definition


def main(home: str, marker: str) -> None:
    original = EncryptingObjectStore._stage

    def stage_then_stop(self: EncryptingObjectStore, attempt_id: str, name: str, stream: Any) -> str:
        digest = original(self, attempt_id, name, stream)
        Path(marker).write_text(f"{attempt_id}/{name}\n")
        time.sleep(600)
        return digest

    EncryptingObjectStore._stage = stage_then_stop  # type: ignore[method-assign]
    build_realization(build_platform(load_settings({}).with_home(Path(home))), definition("v6"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
