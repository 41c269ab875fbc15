"""Type inference over the first ``sample_rows`` rows of the run, not of its first chunk.

SPEC §3 infers undeclared columns' types "from the first ``sample_rows`` rows". With chunks
smaller than the sample, the first chunk alone would decide; :func:`primed` holds back the
leading chunks until the sample is complete (or the source ends), primes the enforcer with
them, then hands every chunk on in order. Memory: at most ``sample_rows`` rows plus one chunk.
A contract that declares every column of the first chunk holds nothing back.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dpone.connectors.base import SourceChunk
from dpone.contracts.enforcer import ContractEnforcementService


def primed(
    chunks: Iterable[SourceChunk], enforcer: ContractEnforcementService
) -> Iterator[SourceChunk]:
    """``chunks`` unchanged, after ``enforcer.prime`` saw the first ``sample_rows`` rows.

    A source whose first chunk has no column left to infer (every one declared) streams
    without holding anything back."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return
    if not enforcer.needs_inference(first.batch.schema):
        yield first
        yield from it
        return
    held = [first]
    rows = first.num_rows
    sample_rows = enforcer.contract.type_inference.sample_rows
    while rows < sample_rows:
        chunk = next(it, None)
        if chunk is None:
            break
        held.append(chunk)
        rows += chunk.num_rows
    enforcer.prime(c.batch for c in held)
    yield from held
    yield from it
