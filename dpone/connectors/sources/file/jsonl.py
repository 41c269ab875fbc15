"""JSON Lines: one JSON object per line, as typed columns or as exact text.

pyarrow.json.read_json reads a whole file and fails when a field changes type between rows,
so JSONL is read ``chunk_size`` lines at a time: typed mode hands each group of lines to
Arrow's JSON parser; text mode parses lines with the json module, keeping numbers' exact text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from dpone.connectors.base import DecodeFailure
from dpone.connectors.errors import SourceDecodeError, SourceTooManyColumns
from dpone.connectors.presence import absent_keys, keyless, rows_batch, with_presence
from dpone.connectors.sources.file.blocks import MAX_FAILURE_TEXT, Block

#: The longest JSONL line a reader grows its block to (a CSV row's is ``csv.max_row_bytes``).
MAX_JSONL_LINE = 64 << 20


class _RawNumber(str):
    """A JSON number (or NaN/Infinity) kept as its source text."""

    __slots__ = ()


def jsonl_batches(
    blocks: Iterator[Block],
    chunk_size: int,
    as_text: bool,
    failures: list[DecodeFailure],
    *,
    max_columns: int = 10_000,
) -> Iterator[pa.RecordBatch]:
    """Batches of up to ``chunk_size`` JSON objects; a line that is not one (invalid text or
    JSON, another JSON value, nesting deeper than the parser goes) becomes a DecodeFailure.
    More than ``max_columns`` keys in the objects of a batch is :class:`SourceTooManyColumns`."""
    objects: list[dict[str, Any]] = []
    keys: set[str] = set()
    for block in blocks:
        for i, raw in enumerate(block.raw.split(b"\n")):
            body = raw.removesuffix(b"\r")
            if not body.strip():
                continue
            obj, what = _json_object(body, as_text)
            if obj is None:
                text = body[:MAX_FAILURE_TEXT].decode("utf-8", "replace")
                failures.append(DecodeFailure(block.line + i, what, text))
                continue
            objects.append(obj)
            keys.update(obj)  # the batch's columns: the union of its objects' keys
            if len(keys) > max_columns:
                where = f"the JSON objects up to line {block.line + i}"
                raise SourceTooManyColumns.over(where, max_columns)
            if len(objects) == chunk_size:
                yield jsonl_batch(objects, as_text)
                objects = []
                keys = set()
    if objects:
        yield jsonl_batch(objects, as_text)


def _json_object(body: bytes, as_text: bool) -> tuple[dict[str, Any] | None, str]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the line is not valid text in the file's encoding"
    try:
        if as_text:
            obj = json.loads(
                text, parse_float=_RawNumber, parse_int=_RawNumber, parse_constant=_RawNumber
            )
        else:
            obj = json.loads(text)
        if not isinstance(obj, dict):
            return None, "the line is not a JSON object"
        if _SURROGATE_ESCAPE.search(body) and not _valid_unicode(obj):
            return None, "the line holds a JSON string that is not valid Unicode (a lone surrogate)"
        if as_text:
            # Nested values become JSON text here, where a too-deep one is still this line's.
            obj = {key: value_text(value) for key, value in obj.items()}
    except RecursionError:
        return None, "the line nests JSON values deeper than the reader allows"
    except ValueError:
        return None, "the line is not valid JSON"
    return obj, ""


#: ``\uD800``..``\uDFFF``: the only way a JSON line that is valid UTF-8 yields a string that
#: is not (a lone surrogate, which no encoder and no sink accepts). Pairs match too; the
#: check below tells them apart, on such lines only.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _valid_unicode(obj: dict[str, Any]) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False, default=str).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def jsonl_batch(objects: list[dict[str, Any]], as_text: bool) -> pa.RecordBatch:
    """Lines as a batch; a key absent from some lines gets a presence column (see
    ``connectors/presence.py``)."""
    if not as_text:
        try:
            return rows_batch(objects)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise SourceDecodeError(
                "JSON values change type between rows (read them as text to let the contract "
                "decide)"
            ) from None
    if not any(objects):
        return keyless(len(objects))
    columns: dict[str, list[str | None]] = {}
    for offset, obj in enumerate(objects):
        for key, value in obj.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [None] * offset
            column.append(value)
        for column in columns.values():
            if len(column) <= offset:
                column.append(None)
    batch = pa.RecordBatch.from_pydict(
        {name: pa.array(values, pa.string()) for name, values in columns.items()}
    )
    _, absent = absent_keys(objects)
    return with_presence(batch, absent) if absent else batch


def value_text(value: Any) -> str | None:
    """A JSON value as the text a text-mode column holds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):  # includes _RawNumber
        return str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    return _json_text(value)


def _json_text(value: Any) -> str:
    if isinstance(value, _RawNumber):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = (f"{json.dumps(k, ensure_ascii=False)}:{_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return json.dumps(value)
