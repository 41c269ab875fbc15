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
    inference = enforcer.contract.type_inference
    it = iter(chunks)
    if not inference.enabled:
        yield from it
        return
    held: list[SourceChunk] = []
    rows = 0
    for chunk in it:
        held.append(chunk)
        rows += chunk.num_rows
        if rows >= inference.sample_rows:
            break
    enforcer.prime(c.batch for c in held)
    yield from held
    yield from it
