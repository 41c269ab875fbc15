"""Run-level overrides of a compiled plan (SPEC §3: run option > manifest > default).

``dpone run --evolution WORD`` sets the three evolution settings; ``--evolution
columns=freeze,data_type=discard_row`` sets only the ones named, the others keep the
manifest's (or the default ``evolve``). Pure: a plan in, a plan out. The manifest's
fingerprint stays the manifest's: an override belongs to the run, not to the manifest.
"""

from __future__ import annotations

import dataclasses

from dpone.contracts.spec import EVOLUTION_MODES, EvolutionMode, EvolutionSpec
from dpone.errors import UsageError
from dpone.manifest.context import EVOLUTION_KEYS
from dpone.manifest.plan import Plan

EVOLUTION_FIX = (
    "use one of evolve, freeze, discard_row, discard_value for all three settings, "
    "or KEY=MODE pairs such as `columns=freeze,data_type=discard_row` "
    "(keys: tables, columns, data_type)"
)


def parse_evolution(text: str) -> dict[str, EvolutionMode]:
    """``freeze`` or ``columns=freeze,...`` as {setting: mode}; a bad option is exit 2."""
    text = text.strip()
    if "=" not in text:
        return dict.fromkeys(EVOLUTION_KEYS, _mode(text))
    settings: dict[str, EvolutionMode] = {}
    for part in text.split(","):
        key, sep, mode = (p.strip() for p in part.partition("="))
        if not sep or key not in EVOLUTION_KEYS:
            raise _bad(f"--evolution: '{key}' is not an evolution setting")
        if key in settings:
            raise _bad(f"--evolution: '{key}' is given twice")
        settings[key] = _mode(mode)
    return settings


def _mode(word: str) -> EvolutionMode:
    if word not in EVOLUTION_MODES:
        raise _bad(f"--evolution: '{word}' is not an evolution mode")
    mode: EvolutionMode = word  # type: ignore[assignment]
    return mode


def _bad(message: str) -> UsageError:
    return UsageError(message, code="DPONE_USAGE_EVOLUTION", fixes=(EVOLUTION_FIX,))


def with_evolution(plan: Plan, settings: dict[str, EvolutionMode]) -> Plan:
    """``plan`` with the run's evolution settings over the manifest's."""
    if not settings:
        return plan
    contract = plan.sink.contract
    evolution: EvolutionSpec = dataclasses.replace(contract.evolution, **settings)
    sink = dataclasses.replace(
        plan.sink, contract=dataclasses.replace(contract, evolution=evolution)
    )
    return dataclasses.replace(plan, sink=sink)
