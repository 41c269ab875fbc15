"""Type inference over the first ``sample_rows`` rows of the run, not of its first chunk.

SPEC §3 infers undeclared columns' types "from the first ``sample_rows`` rows". With chunks
smaller than the sample, the first chunk alone would decide; :func:`primed` holds back the
leading chunks until the sample is complete (or the source ends), primes the enforcer with
them, then hands every chunk on in order. Memory: at most ``sample_rows`` rows plus one chunk.
Chunks with no column left to infer are not held (a failing source fails at its own chunk).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dpone.connectors.base import SourceChunk
from dpone.contracts.enforcer import ContractEnforcementService


def primed(
    chunks: Iterable[SourceChunk], enforcer: ContractEnforcementService
) -> Iterator[SourceChunk]:
    """``chunks`` unchanged, the enforcer primed with the first ``sample_rows`` rows of the
    run before any chunk that has a column left to infer is enforced.

    Chunks with nothing to infer (every column declared or typed already) stream without
    being held. A chunk within the sample that brings a column to infer (a JSONL key absent
    from the rows before it) is held with the chunks after it until the sample is complete:
    the rows before it had no value in that column, so the column's sample is exactly its
    values from here to the sample's end, as in one chunk holding every row."""
    it = iter(chunks)
    sample_rows = enforcer.contract.type_inference.sample_rows
    seen = 0
    for chunk in it:
        if seen < sample_rows and enforcer.needs_inference(chunk.batch.schema):
            held = [chunk]
            rows = seen + chunk.num_rows
            while rows < sample_rows:
                more = next(it, None)
                if more is None:
                    break
                held.append(more)
                rows += more.num_rows
            enforcer.prime(c.batch for c in held)
            yield from held
            yield from it
            return
        seen += chunk.num_rows
        yield chunk
