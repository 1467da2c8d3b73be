"""(u) What every command pays before its work: an S3 client, and a new home's registry.

An S3 client made as boto3 makes it (a new session, whose loader parses S3's service model again) against the
platform's ``s3_session`` + ``s3_client`` (a new session on the process's loader: its own credentials, the parsed
model kept); a fresh SQLite registry migrated one transaction per migration (``upgrade`` called up to each version
in turn, as every registry was made before) against ``upgrade`` on the empty database (one transaction). Medians of
ROUNDS, both paths interleaved. The ratio is the platform's S3 client over boto3's. ``--rows`` does not apply. Run
alone: ``python -m benchmarks.bench_clients``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Result, print_result

ROUNDS = 15
TARGET = 0.5
ENDPOINT = "http://127.0.0.1:9"  # nothing is sent: a client is made, not used
KEYS = {"aws_access_key_id": "bench-access", "aws_secret_access_key": "bench-secret", "region_name": "us-east-1"}


def _median_ms(make: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        make()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _boto3_client() -> object:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(**KEYS)
    session.get_credentials()
    return session.client("s3", endpoint_url=ENDPOINT, config=Config(retries={"max_attempts": 5, "mode": "standard"}, s3={"addressing_style": "path"}))


def _platform_client() -> object:
    from dsv_platform.adapters.objects.s3_client import s3_client, s3_session

    session = s3_session("s3://bench", region=KEYS["region_name"], access_key=KEYS["aws_access_key_id"], secret_key=KEYS["aws_secret_access_key"])
    return s3_client(session, "s3://bench", endpoint_url=ENDPOINT)


def _registries(folder: Path) -> tuple[Callable[[], object], Callable[[], object]]:
    from dsv_platform.adapters.registry import migrations
    from dsv_platform.adapters.registry.engine import create_registry_engine

    made = iter(range(10**6))

    def fresh() -> object:
        return create_registry_engine(f"sqlite:///{folder / f'r{next(made)}.db'}")

    def each() -> object:
        engine = fresh()
        for migration in migrations.MIGRATIONS:  # the first on an empty database, then each on an older one
            migrations.upgrade(engine, target=migration.version)
        engine.dispose()
        return engine

    def one() -> object:
        engine = fresh()
        migrations.upgrade(engine)
        engine.dispose()
        return engine

    return each, one


def measure() -> dict[str, float]:
    _boto3_client(), _platform_client()  # imports and the first parse out of the timing
    out = {"boto3_ms": 0.0, "platform_ms": 0.0, "each_ms": 0.0, "one_ms": 0.0}
    with tempfile.TemporaryDirectory(prefix="dsv-bench-clients-") as folder:
        each, one = _registries(Path(folder))
        one()
        pairs = [("boto3_ms", _boto3_client), ("platform_ms", _platform_client), ("each_ms", each), ("one_ms", one)]
        for _ in range(3):  # interleaved: a slower moment of the machine falls on both paths
            for key, make in pairs:
                out[key] += _median_ms(make) / 3
    return out


def run(rows: int) -> Result:
    m = measure()
    ratio = m["platform_ms"] / m["boto3_ms"]
    details = {
        "S3 client": f"boto3 {m['boto3_ms']:.1f} ms, platform {m['platform_ms']:.1f} ms",
        "fresh SQLite registry": f"a transaction per migration {m['each_ms']:.1f} ms, one for the empty database {m['one_ms']:.1f} ms "
        f"({m['one_ms'] / m['each_ms']:.2f}x)",
    }
    return Result("u) platform S3 client / boto3 client, made", ratio, f"<= {TARGET}x", ratio <= TARGET, details)


if __name__ == "__main__":
    print_result(run(0))
