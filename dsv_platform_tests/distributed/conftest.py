"""Fixtures of the distributed-execution tests: the suite's Redis server (broker and result backend of the Celery workers)."""

from dsv_platform_tests.fixtures.redis_server import redis_server

__all__ = ["redis_server"]
