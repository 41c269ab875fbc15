"""``DlqFileStore``: seed 004's name for the dead-letter store on a local folder.

It is :class:`dpone.dlq.store.DlqStore` itself (a subclass adding only the seed's keyword
form), so every record it writes is the ``dpone.dlq.v1`` record ``dpone run`` writes and
``dpone ops dlq verify`` checks.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from dpone.clock import Clock
from dpone.contracts.dlq import DlqPolicy
from dpone.dlq.store import DlqStore


class DlqFileStore(DlqStore):
    """A DLQ store rooted at ``directory``.

    Limits may be given one by one (``max_record_bytes=...``, as seed 004 does) or as a whole
    ``policy``; a limit given by keyword wins over the policy's. Out-of-range limits raise
    ``DPONE_DLQ_POLICY_INVALID``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        policy: DlqPolicy | None = None,
        clock: Clock | None = None,
        environment: str = "dev",
        require_signature: bool | None = None,
        **limits: Any,
    ) -> None:
        base = policy if policy is not None else DlqPolicy(directory=os.fspath(directory))
        unknown = sorted(set(limits) - {f.name for f in dataclasses.fields(DlqPolicy)})
        if unknown:
            raise TypeError(f"DlqFileStore() got unexpected keyword arguments: {unknown}")
        merged = dataclasses.replace(base, directory=os.fspath(directory), **limits)
        super().__init__(
            directory,
            merged,
            clock=clock,
            environment=environment,
            require_signature=require_signature,
        )


__all__ = ["DlqFileStore"]
