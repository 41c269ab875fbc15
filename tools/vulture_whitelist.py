"""Names vulture reports as unused in dpone/ that are used, each with the reason.

``make lint`` runs vulture over ``dpone/`` and this file (``[tool.vulture]`` in
pyproject.toml); a name written here counts as used. The tests are not scanned: code only
the tests call is dead code. Click commands are skipped by decorator (``@*.command``): click
calls them. Before adding a name, ask whether the code can go instead; a name here needs a
reason a reviewer would accept, written beside it.

This file is read by vulture, never imported or run.
"""

from typing import Any

_: Any = None

# --- called by something other than dpone's own code ---------------------------------------

# The third argument of ``__exit__``: Python passes it; a context manager that does not
# look at the traceback still has to take it.
_.tb
# ``io.RawIOBase.readable``: io.BufferedReader calls it on the raw object-store stream.
_.readable
# ``requests.Response._content``: the HTTP guard stores the capped body where requests
# reads it back (``response.content``, ``response.json()``).
_._content

# --- the public Python API (SPEC §11, docs/python-api.md, tests/seeds) ---------------------

# The Protocol a third-party assertion type implements (docs/architecture.md): its
# documentation for plugin authors; the registry loads classes by entry point, not by it.
_.AssertionType
# Seed 004's Python API: a DLQ policy and a schema contract from their manifest mappings,
# and the enforcement result's documented fields.
_.from_config
_.target_rows
_.target_batch
_.rows_rejected
# ``dpone.manifest.compiler.compile_text``: compiling a manifest held in memory, documented in
# dpone.testing for users' own tests.
_.compile_text

# --- closed vocabularies and code catalogs (STYLE habit 2) ---------------------------------

# Tuples that mirror the JSON Schema enums of the manifest; tests/manifest checks they match.
_.ENFORCEMENTS
_.CONFLICT_POLICIES
_.COERCIONS
# The catalogs of stable DPONE_* codes with their one-line meaning; the tests check that
# every code the compiler and the connectors raise is catalogued.
_.MANIFEST_CODES
_.CONNECTOR_CODES

# --- fields of documents and records, filled and read by name ------------------------------

# dpone.run.v1's ``timings.stages``: written by ``to_json()`` over the dataclass fields.
_.dlq_writer
_.sink_write
_.sink_writer
# ``source.options.storage`` keys: read by name (``getattr``) over STORAGE_TEXT_KEYS.
_.endpoint_url
_.project_id
_.account_name
_.account_key
_.sas_token
# The plan's manifest path: the compiler sets it, the runtime and tests read it as a field.
_.manifest_path
# The errno of a DLQ storage error, kept on the error for whoever handles it (a test, a
# caller of the Python API deciding whether a disk is full).
_.errno_name
# Seed 004's legacy ``QuarantineService.from_manifest``: public Python API for callers of a
# ``quarantine.dir`` manifest (docs/dlq.md), not called inside dpone.
_.from_manifest
# A ``_dpone_runs`` row's field: ``RunRow.to_table`` reads every column by name (``getattr``).
_.error_code
