"""Rendering for the CLI: JSON to stdout, human text to stdout, diagnostics to stderr.

Every command runs its body through :func:`run_command`, which turns a :class:`DponeError`
into its ``dpone.error.v1`` document (``--format json``) or a short text block, and the
error's exit code. An unexpected exception is reported as ``DPONE_INTERNAL`` without a
traceback unless ``DPONE_DEBUG=1``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, NoReturn

import click
import orjson

from dpone import startup
from dpone.errors import EXIT_CONFIG, EXIT_RUN_FAILED, DponeError, ErrorDetail, InternalError

FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json (one document on stdout) for programs.",
)
REQUIRE_SIGNATURE_OPTION = click.option(
    "--require-signature",
    is_flag=True,
    help="Refuse documents without a keyed signature that verifies. The default whenever "
    "DPONE_SIGNING_KEY or DPONE_SIGNING_KEY_FILE is set; without a key it is a usage error.",
)
ALLOW_UNSIGNED_OPTION = click.option(
    "--allow-unsigned",
    is_flag=True,
    help="With a signing key configured, still accept unsigned documents (a bad signature "
    "is refused all the same). Unsigned documents are forgeable by anyone who can write them.",
)


def signature_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--require-signature`` and ``--allow-unsigned``, for a command that reads signed
    documents and passes both on to :mod:`dpone.ops` (which turns them into one decision,
    :func:`dpone.signing.required`)."""
    return REQUIRE_SIGNATURE_OPTION(ALLOW_UNSIGNED_OPTION(command))


ALLOW_ANY_IMPORT_OPTION = click.option(
    "--allow-any-import",
    is_flag=True,
    help="Let custom predicates name any installed module, not only the manifest's folder "
    "and dpone.assertion plugins (validation still never imports it).",
)


def markdown_format_option(document: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--format md|json`` for the ops commands whose human output is Markdown;
    ``document`` names what ``json`` prints."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["md", "json"]),
        default="md",
        show_default=True,
        help=f"md for people, json ({document}) for programs.",
    )


def dumps(doc: Any) -> str:
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def print_json(doc: Any) -> None:
    click.echo(dumps(doc))


def print_document(fmt: str, doc: Any, text: Callable[[], str], *, newline: bool = False) -> None:
    """What a command prints: ``doc`` as JSON when ``fmt`` is ``json``, else ``text()`` (its
    Markdown or text rendering, which ends with its own newline unless ``newline``)."""
    if fmt == "json":
        print_json(doc)
    else:
        click.echo(text(), nl=newline)


def render_detail(detail: ErrorDetail) -> str:
    where = f"{detail.located()}: " if detail.path is not None else ""
    lines = [f"{where}{detail.severity}: {detail.code}: {detail.message}"]
    if detail.pointer is not None:
        lines.append(f"    at {detail.pointer or '/'}")
    lines.extend(f"    fix: {fix}" for fix in detail.fixes)
    return "\n".join(lines)


def render_error_text(err: DponeError) -> str:
    errors = err.errors
    if len(errors) == 1:
        return render_detail(errors[0])
    head = f"{err.code}: {err.message}"
    return "\n".join([head, *(render_detail(d) for d in errors)])


def fail(err: DponeError, fmt: str) -> NoReturn:
    if fmt == "json":
        doc = err.to_json()
        if len(err.errors) > 1:
            doc["errors"] = [d.to_json() for d in err.errors]
        print_json(doc)
    else:
        click.echo(render_error_text(err), err=True)
    sys.exit(err.exit_code)


def run_command(
    fmt: str, body: Callable[[], int | None], *, resumes_collector: bool = False
) -> NoReturn:
    """Run a command body; map its outcome and any error to an exit code (an error is a
    ``dpone.error.v1`` document when ``fmt`` is ``json``, else text, ``md`` included).

    The garbage collector, paused while the command started (``dpone/startup.py``), is on
    again before ``body`` runs, unless the body says it turns it on itself
    (``resumes_collector``: ``dpone run``, once its connectors are loaded)."""
    if not resumes_collector:
        startup.resume()
    try:
        code = body()
    except DponeError as err:
        fail(err, fmt)
    except click.exceptions.Exit:
        raise
    except click.ClickException as exc:
        fail(DponeError(exc.format_message(), code="DPONE_USAGE", stage="cli"), fmt)
    except KeyboardInterrupt:
        from dpone.errors import Interrupted

        fail(
            Interrupted("interrupted by the user; nothing after the last durable step was kept"),
            fmt,
        )
    except Exception as exc:  # an internal bug: say so without dumping a traceback on the user
        fail(InternalError.wrapping(exc), fmt)
    sys.exit(code or 0)


__all__ = [
    "ALLOW_ANY_IMPORT_OPTION",
    "ALLOW_UNSIGNED_OPTION",
    "EXIT_CONFIG",
    "EXIT_RUN_FAILED",
    "FORMAT_OPTION",
    "REQUIRE_SIGNATURE_OPTION",
    "dumps",
    "fail",
    "print_document",
    "print_json",
    "render_error_text",
    "run_command",
    "signature_options",
]
