"""OpenLineage: the facets of a run's evidence, and optional emission of its run events.

The evidence's facets are the standard ones (data-quality assertions, input and output
statistics) in the form the ``openlineage-python`` client serializes them, plus a ``dpone``
facet. They are built as plain dicts here because importing the client costs a fifth of a
second (its package imports every transport), which every run would pay for its evidence;
``tests/evidence/test_lineage.py`` compares them with the client's own serialization. Events
go through the client's transports, configured from ``observability.openlineage``, and only a
run that emits them imports it. Nothing here carries a row value, a credential or an
absolute path.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpone import durable
from dpone._version import __version__
from dpone.assertions.spec import AssertionVerdict
from dpone.ids import ulid_to_uuid

PRODUCER = f"https://dpone.dev/dpone/{__version__}"
DPONE_FACET_SCHEMA = "https://dpone.dev/schemas/openlineage/DponeRunFacet.json"
DEFAULT_NAMESPACE = "dpone"
# The standard facets' schema URLs, as openlineage-python (>= 1.20) stamps them.
_SPEC = "https://openlineage.io/spec/facets"
QUALITY_SCHEMA = (
    f"{_SPEC}/1-1-0/DataQualityAssertionsDatasetFacet.json#/$defs/DataQualityAssertionsDatasetFacet"
)
INPUT_STATS_SCHEMA = (
    f"{_SPEC}/1-0-0/InputStatisticsInputDatasetFacet.json#/$defs/InputStatisticsInputDatasetFacet"
)
OUTPUT_STATS_SCHEMA = (
    f"{_SPEC}/1-0-2/OutputStatisticsOutputDatasetFacet.json"
    "#/$defs/OutputStatisticsOutputDatasetFacet"
)
RUN_STATES = ("START", "COMPLETE", "FAIL")


def run_params(*, manifest_fingerprint: str, mode: str, engine: str) -> dict[str, str]:
    """The run's parameters for lineage: what ran, how it loaded, where it ran. Built from
    these three only, so no credential, DSN or environment value can reach them."""
    return {"manifestFingerprint": manifest_fingerprint, "mode": mode, "engine": engine}


def assertion_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """An assertion's configured parameters (the manifest's values: a row count, column
    names, a predicate's ``module:attr``), kept only where they are plain JSON scalars or
    lists of them."""
    kept: dict[str, Any] = {}
    for key, value in sorted(params.items()):
        if _plain(value) or (isinstance(value, list) and all(_plain(v) for v in value)):
            kept[key] = value
    return kept


def _plain(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def facets(
    verdicts: Sequence[AssertionVerdict],
    *,
    rows_read: int,
    rows_loaded: int,
    rows_quarantined: int,
    enforcement: str,
    params: Mapping[str, str] | None = None,
    assertion_params_by_name: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The evidence's ``openlineage_facets``: standard facets as the client serializes them.

    ``params`` (:func:`run_params`) go into the ``dpone`` facet; each assertion's ``params``
    are its configured ones (:func:`assertion_params`), looked up by name."""
    by_name = assertion_params_by_name or {}
    dpone_facet: dict[str, Any] = {
        "_producer": PRODUCER,
        "_schemaURL": DPONE_FACET_SCHEMA,
        "enforcement": enforcement,
        "rowsQuarantined": rows_quarantined,
    }
    if params is not None:
        dpone_facet["params"] = dict(params)
    return {
        "dataQualityAssertions": {
            "_producer": PRODUCER,
            "_schemaURL": QUALITY_SCHEMA,
            "assertions": [
                {
                    "assertion": v.type,
                    "success": v.verdict == "passed",
                    "name": v.name,
                    "params": assertion_params(by_name.get(v.name, {})),
                }
                for v in verdicts
            ],
        },
        "inputStatistics": {
            "_producer": PRODUCER,
            "_schemaURL": INPUT_STATS_SCHEMA,
            "rowCount": rows_read,
        },
        "outputStatistics": {
            "_producer": PRODUCER,
            "_schemaURL": OUTPUT_STATS_SCHEMA,
            "rowCount": rows_loaded,
        },
        "dpone": dpone_facet,
    }


class LineageEmitter:
    """Sends START and COMPLETE/FAIL events of one run through the configured transport."""

    def __init__(self, config: Mapping[str, Any], base_dir: Path, pipeline: str) -> None:
        from openlineage.client import OpenLineageClient
        from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport
        from openlineage.client.transport.file import FileConfig, FileTransport
        from openlineage.client.transport.transport import Transport

        transport_cfg = config["transport"]
        transport: Transport
        if transport_cfg["type"] == "file":
            path = base_dir / transport_cfg["log_file_path"]
            durable.make_dirs(path.parent)
            # The client appends with the default mode (0666 minus the umask); created here
            # first, the log gets dpone's own 0640 like every other file it writes.
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, durable.FILE_MODE))
            transport = FileTransport(FileConfig(log_file_path=str(path), append=True))
        else:
            transport = ConsoleTransport(ConsoleConfig())
        self.client = OpenLineageClient(transport=transport)
        self.namespace = str(config.get("namespace") or DEFAULT_NAMESPACE)
        self.pipeline = pipeline

    def emit(
        self,
        state: str,
        *,
        run_id: str,
        event_time: str,
        source: str,
        target: str,
        facets_doc: Mapping[str, Any] | None = None,
    ) -> None:
        """Send one run event; ``state`` is one of :data:`RUN_STATES`."""
        from openlineage.client.event_v2 import (
            InputDataset,
            Job,
            OutputDataset,
            Run,
            RunEvent,
            RunState,
        )
        from openlineage.client.facet_v2 import (
            data_quality_assertions_dataset,
            input_statistics_input_dataset,
            output_statistics_output_dataset,
        )

        inputs = [InputDataset(namespace=self.namespace, name=source)]
        outputs = [OutputDataset(namespace=self.namespace, name=target)]
        if facets_doc is not None:
            # The assertions judge the rows read before they load: OpenLineage puts the
            # data-quality assertions facet on the input dataset.
            dq = data_quality_assertions_dataset
            quality = dq.DataQualityAssertionsDatasetFacet(
                assertions=[
                    dq.Assertion(
                        assertion=a["assertion"],
                        success=a["success"],
                        name=a.get("name"),
                        params=a.get("params") or {},
                    )
                    for a in facets_doc["dataQualityAssertions"]["assertions"]
                ]
            )
            read = input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
                rowCount=facets_doc["inputStatistics"]["rowCount"]
            )
            written = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=facets_doc["outputStatistics"]["rowCount"]
            )
            inputs = [
                InputDataset(
                    namespace=self.namespace,
                    name=source,
                    inputFacets={"dataQualityAssertions": quality, "inputStatistics": read},
                )
            ]
            outputs = [
                OutputDataset(
                    namespace=self.namespace,
                    name=target,
                    outputFacets={"outputStatistics": written},
                )
            ]
        event = RunEvent(
            eventType=RunState[state],
            eventTime=event_time,
            run=Run(runId=_uuid_of(run_id), facets=_run_facets(facets_doc)),
            job=Job(namespace=self.namespace, name=self.pipeline),
            producer=PRODUCER,
            inputs=inputs,
            outputs=outputs,
        )
        self.client.emit(event)


def _run_facets(facets_doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``dpone`` run facet with the run's params (:func:`run_params`), once known."""
    from openlineage.client.facet_v2 import RunFacet

    params = (facets_doc or {}).get("dpone", {}).get("params")
    if params is None:
        return {}
    return {"dpone": RunFacet(producer=PRODUCER).with_additional_properties(params=dict(params))}


def _uuid_of(run_id: str) -> str:
    """OpenLineage run ids are UUIDs; a ULID is 128 bits too, so it maps one to one."""
    try:
        return str(ulid_to_uuid(run_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"dpone:{run_id}"))


__all__ = ["RUN_STATES", "LineageEmitter", "assertion_params", "facets", "run_params"]
