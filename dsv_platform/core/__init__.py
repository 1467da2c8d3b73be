"""Pure domain logic: no Dagster, pyiceberg, boto3 or SQLAlchemy imports here.

Importing ``core`` loads the failure table first (core/publication/failures.py), which binds every
failure kind's exit code into core/errors.py: so ``exc.exit_code`` holds wherever an error is raised.
"""

import dsv_platform.core.publication.failures  # noqa: F401  (binds the exit codes; see core/publication/failures.py)
