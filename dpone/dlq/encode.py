"""The write path's record encoder: a whole chunk's canonical record lines, column by column.

A record is RFC 8785 canonical JSON (sorted keys, no whitespace) sealed with its checksum
(:func:`dpone.dlq.rejects.record_canonical_json`, :func:`dpone.dlq.rejects.sealed_record_bytes`).
Building a dict per record and handing it to orjson costs about 6 µs a record on the reference
VM, more than the DLQ's whole budget at 100,000 records/s, and so does joining bytes per record
in Python. Most of a record is the same for every row of a chunk (run, load, times, policy) or
takes few distinct values (reason and column, the diagnostics' types and file: a row's
*shape*): this encoder serializes each shape's parts once, then builds every line of the chunk
at once with Arrow's string kernels (``binary_join_element_wise`` over the columns of record
ids, refs and offsets). Only the checksum is per record (``hashlib`` over each line), and the
payload under ``masked``/``preserve``, which goes through the general canonical path.

The output is one Arrow array of sealed lines whose data buffer *is* the segment's bytes (the
lines in order, each ending with a newline), plus the columns the index needs (record ids,
checksums, codes, columns); no Python object per record besides the id and checksum strings.

The bytes are the canonical bytes, not an approximation: a property test compares them with
``sealed_record_bytes(record_canonical_json(build_record_doc(...)))`` over generated rows.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from itertools import pairwise, repeat
from types import NoneType
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dpone.canonical import CanonicalizationError, canonical_json
from dpone.contracts.dlq import DlqPolicy, PiiPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.errors import DlqInvalidReject, DlqLimitExceeded
from dpone.dlq.index import entry
from dpone.dlq.model import MAX_SAFE_INT, RECORD_SCHEMA, reason_block
from dpone.dlq.refs import MAX_REF_LENGTH, all_have_ref_shape, has_ref_shape, is_replayable
from dpone.dlq.rejects import RejectedRow, check_reject, payload_value

_BIN = pa.large_binary()  # 64-bit offsets: a chunk's lines may pass 2 GiB under preserve
_REPLAY = {
    True: orjson.dumps({"replayable": True, "status": "pending"}),
    False: orjson.dumps({"replayable": False, "status": "not_replayable"}),
}
_REF_KEY = b'","record_ref":"'
_SEAL = b',"sha256":"'
_SEAL_END = b'"}\n'
#: A sealed line is its canonical body without the final ``}``, then these bytes around the
#: checksum (``sha256:`` and 64 hex digits): ``,"sha256":"sha256:<hex>"}`` and the newline.
SEAL_BYTES = len(_SEAL) + 71 + len(_SEAL_END) - 1
#: The JSON size of an index entry without its code and column (ASCII id and checksum), and
#: its separator: ``{"record_id":"<26>","sha256":"sha256:<64>","code":"","column":}`` + ``,``.
ENTRY_FIXED = len(orjson.dumps(entry("0" * 26, "sha256:" + "0" * 64, "", None))) - 4 + 1
_DIGITS = "0123456789"
#: A ref's row (or line) number: 1 to 18 digits, no leading zero; one per line.
_ROW_NUMBERS = re.compile(r"(?:[1-9][0-9]{0,17}\n)*")
_MAX_ROW_DIGITS = 18
#: The decimal digits of the largest source_offset (2**53 - 1).
_MAX_OFFSET_DIGITS = len(str(MAX_SAFE_INT))

#: A ref of the valid shape, for checking a row shape alone.
_PROBE_REF = "dpone://runs/r/loads/l/rows/1"
#: A row's shape: every field but the ref, the offset and the value.
Shape = tuple[Any, Any, Any, Any, Any, Any]


def _scalar(data: bytes) -> pa.Scalar:
    return pa.scalar(data, _BIN)


def column_json_size(column: str | None) -> int:
    """The JSON size of a column name in an index entry."""
    return 4 if column is None else len(orjson.dumps(column))


@dataclass(slots=True)
class EncodedChunk:
    """The sealed lines of a chunk's new records, in record-id order, and their index facts."""

    record_ids: list[str]
    refs: list[str]
    sha256s: list[str]
    codes: list[str]
    columns: list[str | None]
    #: each record's index entry size (bytes of its JSON and a separator)
    entry_sizes: list[int]
    expires_at: str
    lines: pa.LargeBinaryArray

    def __len__(self) -> int:
        return len(self.record_ids)

    def data(self, start: int = 0, stop: int | None = None) -> memoryview:
        """The bytes of lines ``start:stop`` joined (each ends with a newline), without a copy."""
        offsets = self._offsets()
        stop = len(self) if stop is None else stop
        data = memoryview(self.lines.buffers()[2] or b"").cast("B")
        return data[offsets[start] : offsets[stop]]

    def line(self, i: int) -> bytes:
        """The sealed line of record ``i``, newline included."""
        return bytes(self.data(i, i + 1))

    def cuts(self, limit: int) -> list[tuple[int, int]]:
        """``(start, stop)`` of consecutive groups of lines of at most ``limit`` bytes each
        (a line longer than ``limit`` alone in its group)."""
        offsets = self._offsets()
        count = len(self)
        if offsets[count] - offsets[0] <= limit:
            return [(0, count)] if count else []
        out = []
        start = 0
        while start < count:
            stop = bisect_right(offsets, offsets[start] + limit, start + 1, count + 1) - 1
            stop = max(stop, start + 1)
            out.append((start, stop))
            start = stop
        return out

    def _offsets(self) -> memoryview:
        buffer = self.lines.buffers()[1]
        assert buffer is not None
        assert self.lines.offset == 0
        return memoryview(buffer).cast("B").cast("q")[: len(self) + 1]


class RecordEncoder:
    """Canonical bytes of the records of one run and chunk (one ``created_at``).

    ``checked`` caches the validation of a row shape across the chunks of a run (few distinct
    shapes per run): shape -> reason code.
    """

    def __init__(
        self,
        *,
        run_id: str,
        load_id: str,
        policy: DlqPolicy,
        created_at: str,
        expires_at: str,
        checked: dict[Hashable, ReasonCode] | None = None,
        column_sizes: dict[str | None, int] | None = None,
    ) -> None:
        self._policy = policy
        self._pii: PiiPolicy = policy.pii_policy
        self.expires_at = expires_at
        self._created = b'{"created_at":' + orjson.dumps(created_at) + b',"diagnostics":'
        self._after_diag = b',"expires_at":' + orjson.dumps(expires_at) + b',"load_id":'
        self._after_diag += orjson.dumps(load_id) + b',"payload":'
        self._tail = b',"run_id":' + orjson.dumps(run_id) + b',"schema":'
        self._tail += orjson.dumps(RECORD_SCHEMA)
        self._no_value = orjson.dumps({"policy": self._pii, "value": None})
        self._checked: dict[Hashable, ReasonCode] = {} if checked is None else checked
        self._column_sizes: dict[str | None, int] = {} if column_sizes is None else column_sizes

    # --- validation -------------------------------------------------------------------------

    def _shape_code(self, shape: Shape) -> ReasonCode:
        """Check a shape once per run (the refs and offsets are checked for the whole chunk
        apart, so the probe row carries a valid ref and no offset)."""
        code = self._checked.get(shape)
        if code is None:
            reason, column, actual, expected, rule, partition = shape
            probe = RejectedRow(_PROBE_REF, reason, column, actual, expected, rule, None, partition)
            code = self._checked[shape] = check_reject(probe)
        return code

    # --- encoding ---------------------------------------------------------------------------

    def encode(self, rows: Sequence[RejectedRow], record_ids: Sequence[str]) -> EncodedChunk:
        """Check every row (a broken one raises before anything is written) and build the
        sealed lines of their records, one per row in row order, under ``record_ids``.

        Raises ``DPONE_DLQ_INVALID_REJECT`` or ``DPONE_DLQ_LIMIT_EXCEEDED``.
        """
        count = len(rows)
        if count != len(record_ids):
            raise ValueError("one record id per row")
        if not count:
            return self._empty()
        # Columns of the rows (a list comprehension per field is the cheapest transpose).
        refs = [row.record_ref for row in rows]
        fields = (
            [row.reason for row in rows],
            [row.column for row in rows],
            [row.actual_type for row in rows],
            [row.expected_type for row in rows],
            [row.rule_id for row in rows],
            [row.source_partition for row in rows],
        )
        offsets = [row.source_offset for row in rows]
        replayable = _check_refs(refs)
        shapes, shape_of = _shapes(rows, fields)
        codes = [self._shape_code(shape) for shape in shapes]
        _check_offsets(offsets)

        fragments = [self._fragments(s, code) for s, code in zip(shapes, codes, strict=True)]
        take = None if shape_of is None else pa.array(shape_of, pa.int32())

        def per_row(values: list[bytes]) -> pa.Array | pa.Scalar:
            """One value per shape, as a column (or a scalar: one shape)."""
            if take is None:
                return _scalar(values[0])
            return pa.array(values, _BIN).take(take)

        digits = pc.cast(pa.array(offsets, pa.int64()), pa.large_string())
        if digits.null_count:
            digits = pc.fill_null(digits, "null")
        digits = digits.cast(_BIN)
        self._check_diagnostics(fragments, take, digits)

        head = per_row([f[0] for f in fragments])
        payloads = self._payloads([row.value for row in rows])
        if payloads is None:
            middle = [per_row([f[1] + self._no_value + f[2] for f in fragments])]
        else:
            middle = [
                per_row([f[1] for f in fragments]),
                payloads,
                per_row([f[2] for f in fragments]),
            ]
        replays = [b'","replay":' + _REPLAY[flag] + self._tail for flag in (False, True)]
        if isinstance(replayable, bool):
            replay: pa.Array | pa.Scalar = _scalar(replays[replayable])
        else:
            replay = pa.array(replays, _BIN).take(pa.array(replayable, pa.bool_()).cast(pa.int8()))
        before_seal = [
            head,
            digits,
            *middle,
            pa.array(record_ids, _BIN),
            _scalar(_REF_KEY),
            pa.array(refs, _BIN),
            replay,
        ]
        empty = _scalar(b"")
        bodies = pc.binary_join_element_wise(*before_seal, _scalar(b"}"), empty)
        self._check_record_size(bodies)
        sha256s = _checksums(bodies)
        del bodies
        lines = pc.binary_join_element_wise(
            *before_seal, _scalar(_SEAL), pa.array(sha256s, _BIN), _scalar(_SEAL_END), empty
        )
        code_values = [code.value for code in codes]
        entry_size = [
            ENTRY_FIXED + len(code.value) + self._column_size(shape[1])
            for shape, code in zip(shapes, codes, strict=True)
        ]
        if shape_of is None:
            row_codes = [code_values[0]] * count
            entry_sizes = [entry_size[0]] * count
        else:
            row_codes = list(map(code_values.__getitem__, shape_of))
            entry_sizes = list(map(entry_size.__getitem__, shape_of))
        return EncodedChunk(
            record_ids=list(record_ids),
            refs=refs,
            sha256s=sha256s,
            codes=row_codes,
            columns=fields[1],
            entry_sizes=entry_sizes,
            expires_at=self.expires_at,
            lines=lines,
        )

    def _empty(self) -> EncodedChunk:
        return EncodedChunk([], [], [], [], [], [], self.expires_at, pa.array([], _BIN))

    def _fragments(self, shape: Shape, code: ReasonCode) -> tuple[bytes, bytes, bytes, int]:
        """A shape's parts of a record: before the offset, between the offset and the
        payload, between the payload and the record id; and its diagnostics' size without
        the offset's digits."""
        _, column, actual, expected, rule, partition = shape
        try:
            diag_head = (
                canonical_json(
                    {
                        "actual_type": actual,
                        "column": column,
                        "expected_type": expected,
                        "rule_id": rule,
                    }
                )[:-1]
                + b',"source_offset":'
            )
            diag_tail = b"," + canonical_json({"source_partition": partition})[1:]
            reason = canonical_json(reason_block(code, column))
        except (CanonicalizationError, orjson.JSONEncodeError, ValueError):
            raise DlqInvalidReject("a rejected row holds text that is not valid UTF-8") from None
        return (
            self._created + diag_head,
            diag_tail + self._after_diag,
            b',"reason":' + reason + b',"record_id":"',
            len(diag_head) + len(diag_tail),
        )

    def _column_size(self, column: str | None) -> int:
        size = self._column_sizes.get(column)
        if size is None:
            size = self._column_sizes[column] = column_json_size(column)
        return size

    def _payloads(self, values: list[Any]) -> pa.LargeBinaryArray | None:
        """The per-row payloads, or None when every row has the chunk's constant one."""
        policy = self._pii
        if policy == "reference_only" or all(value is None for value in values):
            return None
        out = []
        for value in values:
            if value is None:
                out.append(self._no_value)
                continue
            try:
                out.append(
                    canonical_json({"policy": policy, "value": payload_value(policy, value)})
                )
            except (CanonicalizationError, orjson.JSONEncodeError, ValueError):
                raise DlqInvalidReject(
                    "a rejected row holds text that is not valid UTF-8"
                ) from None
        return pa.array(out, _BIN)

    def _check_diagnostics(
        self,
        fragments: list[tuple[bytes, bytes, bytes, int]],
        take: pa.Array | None,
        digits: pa.Array,
    ) -> None:
        limit = self._policy.max_diagnostic_bytes
        if max(f[3] for f in fragments) + _MAX_OFFSET_DIGITS <= limit:
            return
        fixed = pa.array([f[3] for f in fragments], pa.int64())
        lengths = pc.binary_length(digits).cast(pa.int64())
        sizes = pc.add(fixed[0] if take is None else fixed.take(take), lengths)
        for size in sizes.to_pylist():
            if size > limit:
                raise DlqLimitExceeded(
                    "max_diagnostic_bytes",
                    size,
                    limit,
                    "the diagnostics of a rejected row are too large",
                )

    def _check_record_size(self, bodies: pa.Array) -> None:
        limit = self._policy.max_record_bytes
        lengths = pc.binary_length(bodies)
        longest = pc.max(lengths).as_py()
        if longest is None or longest + SEAL_BYTES <= limit:
            return
        for length in lengths.to_pylist():
            if length + SEAL_BYTES > limit:
                raise DlqLimitExceeded(
                    "max_record_bytes",
                    length + SEAL_BYTES,
                    limit,
                    "a DLQ record is too large",
                )


def _check_refs(refs: list[Any]) -> bool | list[bool]:
    """Refuse a ref that is not a ``dpone://`` reference (:func:`has_ref_shape`); whether each
    ref is replayable (:func:`dpone.dlq.refs.is_replayable`), one bool for all when they
    agree.

    The refs of a chunk are usually one file's rows: one prefix and a row number. That prefix
    is checked once and each ref's number apart, which costs less than a regex per ref.
    """
    first = refs[0]
    prefix = first.rstrip(_DIGITS) if type(first) is str else ""
    if (
        prefix
        and len(prefix) + _MAX_ROW_DIGITS <= MAX_REF_LENGTH
        and has_ref_shape(prefix + "1")
        and set(map(type, refs)) == {str}
        and all(map(str.startswith, refs, repeat(prefix, len(refs))))
    ):
        start = len(prefix)
        numbers = "\n".join([ref[start:] for ref in refs]) + "\n"
        if _ROW_NUMBERS.fullmatch(numbers) and numbers.count("\n") == len(refs):
            return is_replayable(first)
    if not all_have_ref_shape(refs):
        for ref in refs:
            if not has_ref_shape(ref):
                raise DlqInvalidReject(
                    "record_ref is not a dpone:// reference (use dpone.dlq.refs to build it)"
                )
    # Every ref has a valid shape: a file ref's path is percent-encoded and a run ref has no
    # "&", so "&row=" is there exactly for a file row.
    flags = ["&row=" in ref for ref in refs]
    return flags[0] if all(flags) or not any(flags) else flags


def _shapes(
    rows: Sequence[RejectedRow], fields: tuple[list[Any], ...]
) -> tuple[list[Shape], list[int] | None]:
    """The distinct shapes of the rows, and each row's shape (None: one shape for all).

    Only the fields that vary within the chunk are looked at per row.
    """
    try:
        distinct = [dict.fromkeys(values) for values in fields]
    except TypeError:  # an unhashable field: check_reject names it
        for row in rows:
            check_reject(row)
        raise DlqInvalidReject("a rejected row holds a field of the wrong type") from None
    varying = [i for i, values in enumerate(distinct) if len(values) > 1]
    base = [next(iter(values)) for values in distinct]
    if not varying:
        return [tuple(base)], None
    if len(varying) == 1:
        keys: list[Any] = fields[varying[0]]
        index: dict[Any, Any] = distinct[varying[0]]
    else:
        keys = list(zip(*(fields[i] for i in varying), strict=True))
        index = dict.fromkeys(keys)
    shapes: list[Shape] = []
    for number, key in enumerate(index):
        index[key] = number
        shape = list(base)
        for at, value in zip(varying, key if len(varying) > 1 else (key,), strict=True):
            shape[at] = value
        shapes.append(tuple(shape))
    return shapes, list(map(index.__getitem__, keys))


def _check_offsets(offsets: list[Any]) -> None:
    """Every ``source_offset`` None or an int in 0..2**53-1 (not a bool)."""
    kinds = set(map(type, offsets))
    if not kinds <= {int, NoneType}:
        raise DlqInvalidReject("source_offset must be an integer in 0..2**53-1")
    numbers = offsets if NoneType not in kinds else [o for o in offsets if o is not None]
    if numbers and (min(numbers) < 0 or max(numbers) > MAX_SAFE_INT):
        raise DlqInvalidReject("source_offset must be an integer in 0..2**53-1")


def _checksums(bodies: pa.LargeBinaryArray) -> list[str]:
    """``sha256:<hex>`` of each body (one hashlib call per record)."""
    count = len(bodies)
    buffer = bodies.buffers()[2]
    data = memoryview(buffer if buffer is not None else b"").cast("B")
    offsets = memoryview(bodies.buffers()[1]).cast("B").cast("q")[: count + 1]
    sha: Callable[[Any], Any] = hashlib.sha256
    return ["sha256:" + sha(data[a:b]).hexdigest() for a, b in pairwise(offsets)]


__all__ = [
    "ENTRY_FIXED",
    "SEAL_BYTES",
    "EncodedChunk",
    "RecordEncoder",
    "column_json_size",
]
