"""The declared contract: an enforcement mode its coercion does not contradict, decimal
columns whose scale fits their precision."""

from __future__ import annotations

from dpone.errors import ErrorDetail
from dpone.manifest.context import CONTRACT, CompileContext, Document, contract_columns
from dpone.manifest.pointers import join_pointer


def check_contract(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    errors = []
    contract = doc["sink"]["options"]["schema_contract"]
    if contract["enforcement"] == "coerce" and contract["coercion"] == "none":
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_COERCION",
                "enforcement coerce always applies the safe coercions; coercion: none contradicts "
                "it",
                f"{CONTRACT}/coercion",
                fixes=(
                    "remove `coercion: none`",
                    "or use enforcement: strict for canonical values only",
                ),
            )
        )
    for name, spec in contract_columns(doc).items():
        pointer = join_pointer(f"{CONTRACT}/columns", name)
        if spec["type"] == "decimal" and spec.get("scale", 0) > spec["precision"]:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_DECIMAL_SCALE",
                    f"column '{name}': scale {spec['scale']} exceeds precision {spec['precision']}",
                    f"{pointer}/scale",
                    fixes=("use a scale between 0 and the precision",),
                )
            )
    return errors
