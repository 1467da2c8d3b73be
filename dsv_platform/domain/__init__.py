"""The fraud sample domain: sources, generated batches, labels and the failure-mode injectors.

Pure like ``core`` (no Dagster, pyiceberg, boto3 or SQLAlchemy): adapters and
defs call into it.
"""

from dsv_platform.domain.batch import PreparedBatch, RawBatch, batch_file_name, parse_batch_file_name, prepare_batch
from dsv_platform.domain.events import daily_batch
from dsv_platform.domain.generator import START, FraudDomain
from dsv_platform.domain.labels import LABEL_DEFINITIONS, LabelDefinition, compute_labels, label_definition
from dsv_platform.domain.sources import FRAUD_LABELS, SOURCES, TableSpec

__all__ = [
    "FRAUD_LABELS",
    "LABEL_DEFINITIONS",
    "SOURCES",
    "START",
    "FraudDomain",
    "LabelDefinition",
    "PreparedBatch",
    "RawBatch",
    "TableSpec",
    "batch_file_name",
    "compute_labels",
    "daily_batch",
    "label_definition",
    "parse_batch_file_name",
    "prepare_batch",
]
