"""Suite-wide fixtures: real servers the suite starts itself (PostgreSQL, S3 on loopback)."""

pytest_plugins = [
    "dsv_platform_tests.fixtures.postgres_server",
    "dsv_platform_tests.fixtures.s3_server",
    "dsv_platform_tests.fixtures.code_repo",
]
