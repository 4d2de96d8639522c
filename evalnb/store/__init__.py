"""The SQLite results store: suite versions, runs, samples, task metrics and the output cache.

`Store` is the only place in evalnb that knows SQL. Finished samples go through a
`StoreWriter` (group commit from a background thread); `request_key` names a model call for
the reusable output cache; `redact` keeps credentials out of everything stored.
"""

from __future__ import annotations

from evalnb.store._codec import SAMPLE_FIELDS, SAMPLE_STATUSES, text_hash
from evalnb.store._keys import (
    bridge_request_key,
    canonical_json,
    epoch_request_key,
    request_key,
    repeat_request_key,
    request_key_function,
    run_signature,
    sanitize_models,
)
from evalnb.redaction import redact
from evalnb.store._reuse import row_digest
from evalnb.store._runs import MAX_EPOCHS, RUN_STATUSES, UnknownRunError, UnknownSuiteError, new_run_id
from evalnb.store._schema import SCHEMA_VERSION
from evalnb.store._store import Store, default_store_path, open_store
from evalnb.store._trust import foreign_run, foreign_suite, run_endpoints, sign_run, suite_versions, trust_key_path
from evalnb.store._writer import StoreWriteError, StoreWriter

__all__ = [
    "MAX_EPOCHS",
    "RUN_STATUSES",
    "SAMPLE_FIELDS",
    "SAMPLE_STATUSES",
    "SCHEMA_VERSION",
    "Store",
    "StoreWriteError",
    "StoreWriter",
    "UnknownRunError",
    "UnknownSuiteError",
    "bridge_request_key",
    "canonical_json",
    "default_store_path",
    "epoch_request_key",
    "foreign_run",
    "foreign_suite",
    "new_run_id",
    "open_store",
    "redact",
    "repeat_request_key",
    "request_key",
    "request_key_function",
    "row_digest",
    "run_endpoints",
    "run_signature",
    "sanitize_models",
    "sign_run",
    "suite_versions",
    "text_hash",
    "trust_key_path",
]
