"""The dlt sink: a run's good rows as one dlt load package, loaded into any dlt destination.

``sink.py`` the sink and its recovery, ``load.py`` one load, ``records.py`` the package records,
``destination.py`` what is asked of the destination, ``errors.py`` dlt's exceptions as dpone's.
:class:`DltSink` is imported on first use; the sink imports dlt when a run builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.connectors.sinks.dlt.sink import DltSink

__getattr__, __dir__ = exports(__name__, {"DltSink": "dpone.connectors.sinks.dlt.sink"})

__all__ = ["DltSink"]
