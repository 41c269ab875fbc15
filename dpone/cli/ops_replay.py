"""``dpone ops quarantine-replay``: plan a replay, or execute it for a file source (SPEC §8).

Without ``--manifest`` the command prints the run's plan with ``unbound`` identities: it shows
what a replay would touch and can never apply anything. ``--manifest M`` pins M's resolver and
sink; ``--execute`` applies the plan with the first-party file executor
(:mod:`dpone.ops.replay.binding`). ``--yes`` is the old "apply" switch: it exits 4
(``DPONE_DLQ_REPLAY_EXECUTOR_REQUIRED``) and applies nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from dpone import logs
from dpone.cli.output import (
    ALLOW_ANY_IMPORT_OPTION,
    markdown_format_option,
    print_document,
    run_command,
    signature_options,
)
from dpone.errors import UsageError

#: Items shown in Markdown (the JSON output always holds every item).
MD_ITEMS = 50
EXECUTOR_FIX = (
    "pass --execute --manifest M to apply the plan with the first-party file executor, or "
    "use dpone.ops.replay with a resolver and sink of your own"
)


@click.command("quarantine-replay")
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    help="The DLQ root. Default with --manifest: the manifest's dlq.directory.",
)
@click.option("--run-id", required=True, help="The closed DLQ run to replay.")
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Pin the plan to this manifest's file source and sink (a bound plan).",
)
@click.option(
    "--execute",
    is_flag=True,
    help="Apply the plan: re-read, re-check and load each row once, then acknowledge it.",
)
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="With --execute: a plan printed earlier (--format json); refused unless it is the "
    "plan the store, the manifest and the sink give now.",
)
@click.option(
    "--max-items",
    type=click.IntRange(1, 1_000_000),
    default=None,
    help="The plan's bound. Default: the manifest's dlq.max_records_per_run, or 100000.",
)
@click.option(
    "--yes",
    is_flag=True,
    help="Deprecated. Without --execute it exits 4 and applies nothing.",
)
@ALLOW_ANY_IMPORT_OPTION
@signature_options
@markdown_format_option("the plan or result document")
def quarantine_replay_cmd(
    directory: Path | None,
    run_id: str,
    manifest: Path | None,
    execute: bool,
    plan_file: Path | None,
    max_items: int | None,
    yes: bool,
    allow_any_import: bool,
    require_signature: bool,
    allow_unsigned: bool,
    fmt: str,
) -> None:
    """Print the replay plan of a DLQ run; with --execute --manifest M, apply it."""

    def body() -> int:
        from dpone import api, ops
        from dpone.ops.replay.errors import ReplayExecutorRequired

        logs.to_stderr()
        if (yes or execute) and (not execute or manifest is None):
            raise ReplayExecutorRequired(
                "no replay executor: generic replay is plan-only and nothing was applied",
                fixes=(EXECUTOR_FIX,),
            )
        if plan_file is not None and not execute:
            raise UsageError("--plan is the plan --execute checks and applies; add --execute")
        # The manifest is compiled as `dpone run` compiles it, so a predicate that needed
        # --allow-any-import there needs it here too (and is still never imported to plan).
        bound = (
            None if manifest is None else api.compile(manifest, allow_any_import=allow_any_import)
        )
        if not execute:
            doc = ops.replay_plan(
                run_id,
                dlq_dir=directory,
                manifest=bound,
                max_items=max_items,
                require_signature=require_signature,
                allow_unsigned=allow_unsigned,
            ).to_json()
            print_document(fmt, doc, lambda: render_plan(doc))
            return 0
        assert bound is not None  # --execute without --manifest was refused above
        result = ops.replay_execute(
            bound,
            run_id,
            dlq_dir=directory,
            plan=plan_file,
            max_items=max_items,
            require_signature=require_signature,
            allow_unsigned=allow_unsigned,
        ).to_json()
        print_document(fmt, result, lambda: render_result(result))
        return 0

    run_command(fmt, body)


def _code(text: object) -> str:
    return "`" + str(text).replace("`", "'").replace("|", "\\|") + "`"


def render_plan(doc: dict[str, Any]) -> str:
    run = doc["run"]
    unbound = "unbound" in (doc["resolver_identity"], doc["target_identity"])
    lines = [
        "# DLQ replay plan",
        "",
        f"- plan: {_code(doc['plan_id'])}",
        f"- run: {_code(run['run_id'])} of pipeline {_code(run['pipeline'] or '-')}, "
        f"load {_code(run['load_id'])}",
        f"- items: {doc['item_count']} ({doc['replayable_count']} replayable), "
        f"bound {doc['max_items']}",
        f"- resolver: {_code(doc['resolver_identity'])}",
        f"- target: {_code(doc['target_identity'])}",
        "",
    ]
    if unbound:
        lines += [
            "This plan is unbound: it names no resolver and no target, so it can be read but "
            "never executed. Replay with `--execute --manifest M` (after fixing M's contract).",
            "",
        ]
    items = doc["items"]
    if items:
        lines += [
            "| # | record | reason | record_ref | idempotency key |",
            "| ---: | --- | --- | --- | --- |",
        ]
        for n, item in enumerate(items[:MD_ITEMS], 1):
            lines.append(
                f"| {n} | {item['record_id']} | {item['reason_code']} | "
                f"{_code(item['record_ref'])} | {_code(item['idempotency_key'])} |"
            )
        if len(items) > MD_ITEMS:
            lines.append(f"\n{len(items) - MD_ITEMS} more item(s): use --format json for all.")
    else:
        lines.append("The run holds no records.")
    lines.append("")
    return "\n".join(lines)


#: What a row still rejected by replay needs, by the reason's category (the report's reader
#: has just changed the manifest and wants to know why that was not enough).
_STILL_REJECTED_HINTS = {
    "schema": "the contract of the manifest given to --execute still refuses the value: "
    "change its column type, nullability or evolution, then replay again",
    "sink": "the target table cannot hold the value as it is (a narrower column than the "
    "contract's type would round or cut it, or the row lacks a merge key): widen the "
    "table's column or bring the contract back in line with it, then replay again",
    "quality": "an assertion of the manifest still fails for the row (unique_columns: its "
    "key is in the target already); it stays pending unless the assertion changes",
    "source": "the source line still does not decode: the file would have to change, and a "
    "changed file is refused (its SHA-256); load a corrected copy as a new run instead",
}


def render_result(doc: dict[str, Any]) -> str:
    counts = doc["counts"]
    lines = [
        "# DLQ replay result",
        "",
        f"- plan: {_code(doc['plan_id'])}",
        f"- run: {_code(doc['run_id'])}",
        f"- target: {_code(doc['target_identity'])}",
        "",
        "| outcome | items |",
        "| --- | ---: |",
        *(f"| {name} | {count} |" for name, count in counts.items()),
        "",
        f"{counts['applied']} row(s) applied and acknowledged now; "
        f"{doc['pending']} record(s) stay pending.",
        "",
    ]
    if doc["still_rejected_by_reason"]:
        lines += ["## Still rejected", "", "| reason | rows |", "| --- | ---: |"]
        lines += [f"| {code} | {n} |" for code, n in doc["still_rejected_by_reason"].items()]
        shown = [i for i in doc["items"] if i["outcome"] == "still_rejected"][:MD_ITEMS]
        lines += ["", "| record | reason | column |", "| --- | --- | --- |"]
        lines += [
            f"| {i['record_id']} | {i['reason_code']} | "
            f"{_code(i['column']) if i['column'] else '-'} |"
            for i in shown
        ]
        categories = sorted({code.split(".", 1)[0] for code in doc["still_rejected_by_reason"]})
        hints = [
            f"- {c}.*: {_STILL_REJECTED_HINTS[c]}" for c in categories if c in _STILL_REJECTED_HINTS
        ]
        if hints:
            lines += ["", "What to do:", *hints]
        lines.append("")
    return "\n".join(lines)


__all__ = ["quarantine_replay_cmd", "render_plan", "render_result"]
