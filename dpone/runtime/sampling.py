"""Type inference over the first ``sample_rows`` rows of the run, not of its first chunk.

SPEC §3 infers undeclared columns' types "from the first ``sample_rows`` rows". With chunks
smaller than the sample, the first chunk alone would decide; :func:`primed` holds back the
leading chunks until the sample is complete (or the source ends), primes the enforcer with
them, then hands every chunk on in order. Memory: at most ``sample_rows`` rows plus one chunk.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dpone.connectors.base import SourceChunk
from dpone.contracts.enforcer import ContractEnforcementService


def primed(
    chunks: Iterable[SourceChunk], enforcer: ContractEnforcementService
) -> Iterator[SourceChunk]:
    """``chunks`` unchanged, after ``enforcer.prime`` saw the first ``sample_rows`` rows."""
    it = iter(chunks)
    first = next(it, None)
    if first is None:
        return
    # Held even when the first chunk has nothing to infer: a keyed source's later chunks may
    # bring a column within the sample (a JSONL key absent from the first rows), which one
    # chunk holding every row would type from the whole sample.
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
