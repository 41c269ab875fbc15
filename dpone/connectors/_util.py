"""Where the file source imports :func:`rechunk` from until it imports ``connectors.batches``."""

from __future__ import annotations

from dpone.connectors.batches import rechunk as rechunk
