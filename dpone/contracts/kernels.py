"""Small vectorized building blocks over Arrow arrays, shared by the parsers and the enforcer.

Masks are always *clean*: a ``BooleanArray`` without nulls. Every helper keeps that invariant
so the callers can combine masks with plain ``and``/``or`` and count them with ``true_count``.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from dpone.records import frozen


@frozen
class Conversion:
    """The outcome of converting one column to its logical type.

    ``values`` has the target Arrow type and is NULL where the input was NULL or did not fit;
    ``failed`` is a clean mask of the inputs that were present but did not fit (None: none did).
    """

    values: pa.Array
    failed: pa.BooleanArray | None = None

    @property
    def failures(self) -> int:
        return 0 if self.failed is None else int(self.failed.true_count)


def clean(mask: pa.Array) -> pa.BooleanArray:
    """``mask`` with NULL read as false."""
    return mask if mask.null_count == 0 else pc.fill_null(mask, False)


def falses(n: int) -> pa.BooleanArray:
    return pc.fill_null(pa.nulls(n, pa.bool_()), False)


def nulls(n: int, dtype: pa.DataType) -> pa.Array:
    return pa.nulls(n, dtype)


def present(arr: pa.Array) -> pa.BooleanArray:
    """Clean mask of the non-null slots."""
    return pc.is_valid(arr)


def count(mask: pa.BooleanArray | None) -> int:
    return 0 if mask is None else int(mask.true_count)


def failed_of(arr: pa.Array, ok: pa.Array) -> pa.BooleanArray:
    """Present slots of ``arr`` where ``ok`` is not true."""
    if arr.null_count == 0:
        return pc.invert(clean(ok))
    return pc.and_not(pc.is_valid(arr), clean(ok))


def null_where(values: pa.Array, mask: pa.BooleanArray | None) -> pa.Array:
    """``values`` with NULL wherever ``mask`` is true."""
    if mask is None or mask.true_count == 0:
        return values
    return pc.if_else(mask, pa.scalar(None, values.type), values)


def keep_where(arr: pa.Array, ok: pa.BooleanArray) -> pa.Array:
    """``arr`` with NULL wherever ``ok`` is false.

    For string arrays this swaps the validity bitmap instead of copying the text, so a cast that
    follows only parses the slots that passed validation (it cannot raise on the others).
    """
    if ok.null_count:
        ok = clean(ok)
    if pa.types.is_string(arr.type) and ok.offset == 0 and len(ok) == len(arr) and len(arr) > 0:
        if arr.null_count:
            ok = pc.and_(ok, pc.is_valid(arr))
        bufs = arr.buffers()
        offsets = bufs[1]
        if arr.offset:
            offsets = offsets.slice(arr.offset * 4, (len(arr) + 1) * 4)
        return pa.Array.from_buffers(arr.type, len(arr), [ok.buffers()[1], offsets, bufs[2]])
    return pc.if_else(ok, arr, pa.scalar(None, arr.type))


def as_string(arr: pa.Array) -> pa.Array:
    """Any text-like array (large, view, dictionary-encoded) as a plain ``string`` array."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_string(t):
        return arr
    return arr.cast(pa.string())


def patch(
    arr: pa.Array,
    values: pa.Array,
    failed: pa.BooleanArray,
    repair: Callable[[pa.Array], Conversion],
) -> Conversion:
    """Run ``repair`` on the failed slots only and scatter what it fixed back into ``values``.

    This is how every parser keeps per-row detail off the hot path: the first pass validates the
    whole column with a few vectorized kernels; the (rare) slots it could not take are gathered
    into a small array, given to the slower ``repair`` pass, and merged back.
    """
    positions = pc.indices_nonzero(failed)
    fixed = repair(arr.take(positions))
    if fixed.failed is not None and fixed.failed.true_count == len(positions):
        return Conversion(values, failed)
    if fixed.values.null_count == len(fixed.values):
        return Conversion(values, failed)
    repaired = fixed.values
    if repaired.type != values.type:
        repaired = repaired.cast(values.type)
    merged = pc.replace_with_mask(values, failed, repaired)
    still = falses(len(positions)) if fixed.failed is None else fixed.failed
    remaining = pc.replace_with_mask(failed, failed, still)
    return Conversion(merged, remaining if remaining.true_count else None)


def parse_with(
    arr: pa.Array,
    first: Callable[[pa.Array], tuple[pa.Array, pa.BooleanArray]],
    repair: Callable[[pa.Array], Conversion] | None,
) -> Conversion:
    """``first`` parses the whole column; ``repair`` (if any) retries what ``first`` rejected."""
    values, ok = first(arr)
    failed = failed_of(arr, ok)
    if failed.true_count == 0:
        return Conversion(values)
    if repair is None:
        return Conversion(values, failed)
    return patch(arr, values, failed, repair)


def all_failed(arr: pa.Array, dtype: pa.DataType) -> Conversion:
    """Every present slot fails; the values are all NULL."""
    mask = pc.is_valid(arr)
    return Conversion(nulls(len(arr), dtype), mask if mask.true_count else None)


def whole_cast(arr: pa.Array, dtype: pa.DataType) -> pa.Array | None:
    """The clean-chunk fast path: one cast of the whole column, or None if any value fails.

    Only used where Arrow's parser accepts a subset of the mode's grammar (checked by the
    callers for the few forms where it does not) and enforces the same calendar and bounds,
    so a cast that succeeds cannot have lost or invented anything. Its error (which quotes a
    value) is dropped; the exact path then finds the failing values.
    """
    try:
        return pc.cast(arr, dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def matches(arr: pa.Array, pattern: str) -> pa.BooleanArray:
    """Clean mask of the slots of a ``string`` array that match the RE2 ``pattern``."""
    return clean(pc.match_substring_regex(arr, pattern))


def trim(arr: pa.Array) -> pa.Array:
    """ASCII whitespace stripped from both ends of every slot."""
    return pc.ascii_trim_whitespace(arr)
