"""The compiler, in order: the passes over a manifest document and the checks they run.

Each pass takes the document and the compile context and returns a richer document or a list
of errors (sqlglot's optimizer RULES are the model); ``compiler.compile_loaded`` runs them and
stops at the first pass that reports errors, so a later pass may rely on an earlier one. The
document is schema-valid, or what its schema errors leave readable (``dpone.manifest.salvage``;
``STATIC_INPUTS`` says which checks still run then). No pass touches files or the environment
(the static checks form one pass, every one of them reported at once); the ``AFTER_PASSES``
checks do, so they run last, on whatever document the passes reached.
"""

from __future__ import annotations

from dpone.manifest.checks.assertions import check_assertions
from dpone.manifest.checks.colnames import check_column_names
from dpone.manifest.checks.contract import check_contract
from dpone.manifest.checks.dlq import check_dlq
from dpone.manifest.checks.dlt_sink import check_dlt_sink
from dpone.manifest.checks.dlt_source import check_dlt_source, check_installed
from dpone.manifest.checks.engine import check_engine
from dpone.manifest.checks.incremental import check_incremental
from dpone.manifest.checks.legacy import check_legacy_quarantine, deprecations
from dpone.manifest.checks.normalize import check_normalize
from dpone.manifest.checks.paths import (
    check_dlq_directory,
    check_legacy_export_directory,
    check_nul_bytes,
)
from dpone.manifest.checks.predicates import check_predicates
from dpone.manifest.checks.prevalidated import check_prevalidated
from dpone.manifest.checks.secrets import check_secrets
from dpone.manifest.checks.source import check_source
from dpone.manifest.checks.storage import check_storage
from dpone.manifest.checks.strategy import check_strategy
from dpone.manifest.checks.systables import check_system_tables
from dpone.manifest.context import (
    ASSERTIONS,
    CONTRACT,
    DLQ,
    LEGACY_QUARANTINE,
    Check,
    Pass,
    all_at_once,
)
from dpone.manifest.normalize import (
    apply_defaults,
    drop_extensions,
    map_dlt_merge_key,
    map_legacy_keys,
    normalize_shorthands,
)

STATIC_CHECKS: tuple[Check, ...] = (
    check_source,
    check_normalize,
    check_storage,
    check_nul_bytes,
    check_dlq_directory,
    check_strategy,
    check_dlt_sink,
    check_system_tables,
    check_contract,
    check_column_names,
    check_dlq,
    check_incremental,
    check_secrets,
    check_dlt_source,
    check_assertions,
    check_engine,
    check_prevalidated,
    check_legacy_quarantine,
    check_legacy_export_directory,
)

#: What each check reads (JSON pointers): it runs after schema errors only when none of them
#: lies in or above these; () = any salvaged document (it walks every value it meets).
STATIC_INPUTS: dict[Check, tuple[str, ...]] = {
    check_source: ("/source",),
    check_normalize: ("/source", "/sink/type", "/sink/strategy", "/runtime/engine"),
    check_storage: ("/source",),
    check_nul_bytes: (),
    check_dlq_directory: ("/runtime/work_dir", DLQ, "/sink/options/runtime_evidence"),
    check_strategy: ("/sink/strategy", f"{CONTRACT}/columns"),
    check_dlt_sink: ("/sink",),
    check_system_tables: ("/sink/type", "/sink/options/system_tables"),
    check_contract: (CONTRACT,),
    check_column_names: (f"{CONTRACT}/columns", "/source"),
    check_dlq: ("/sink/options", ASSERTIONS, "/environment"),
    check_incremental: ("/source/incremental", f"{CONTRACT}/columns"),
    check_secrets: (),
    check_dlt_source: ("/source",),
    check_assertions: (ASSERTIONS, f"{CONTRACT}/columns"),
    check_engine: (
        "/source/partitions",
        "/source/partition_column",
        "/runtime/engine",
        f"{ASSERTIONS}/unique_columns",
    ),
    check_prevalidated: ("/source", "/sink", "/runtime/engine", ASSERTIONS),
    check_legacy_quarantine: (LEGACY_QUARANTINE, f"{DLQ}/enabled", "/environment"),
    check_legacy_export_directory: (
        LEGACY_QUARANTINE,
        "/runtime/work_dir",
        DLQ,
        "/sink/options/runtime_evidence",
    ),
}

#: The compiler's pure passes, in order.
PASSES: tuple[Pass, ...] = (
    drop_extensions,
    map_dlt_merge_key,  # before the defaults: the deprecated key becomes its replacement
    map_legacy_keys,  # before the defaults: the legacy folder is the DLQ's unless one is named
    apply_defaults,  # before the shorthands: `evolution` defaults to the one word `evolve`
    normalize_shorthands,
    all_at_once(STATIC_CHECKS, STATIC_INPUTS),
)

#: Warnings about the document as written (deprecated keys): they never stop the compiler; the
#: plan (or the manifest's error) carries them to ``dpone validate`` and ``dpone run``.
WARNINGS: tuple[Check, ...] = (deprecations,)

#: Checks that look beyond the document, run after the passes (and after schema errors, on
#: what the schema accepted): custom predicates are found and parsed (never imported) to prove
#: they resolve; a dlt-backed source needs dlt installed.
AFTER_PASSES: tuple[Check, ...] = (
    check_predicates,
    check_installed,
)
