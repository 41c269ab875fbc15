"""Where a pipeline's files are, and reading them back as untrusted input (SPEC §14).

A work dir holds ``state/<name>.json``, ``runs/<name>.journal.json`` (and ``.lock``),
``evidence/<name>/<run_id>/data_contract_evidence.json`` and the DLQ root ``dlq/``; a
manifest may move the evidence and the DLQ elsewhere, so ``--manifest`` gives the exact
folders and ``--work-dir`` the defaults. Every name is checked before it becomes a path, every
file is opened without following a symbolic link, size-limited, parsed against its schema and
checksum: a planted or edited file is reported, never acted on.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone import signing
from dpone.errors import UsageError
from dpone.evidence.writer import EVIDENCE_FILE
from dpone.ids import is_identifier
from dpone.published import checked_document
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.manifest.plan import Plan

PathLike = str | os.PathLike[str]

#: A pipeline name as the manifest allows it (and so as it names files).
PIPELINE_NAME = re.compile(r"[a-z0-9_]{3,64}")
EVIDENCE_SCHEMA = "dpone.data_contract_evidence.v1"
MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


class PipelineNameInvalid(UsageError):
    code = "DPONE_PIPELINE_NAME_INVALID"


class PipelineNotFound(UsageError):
    code = "DPONE_PIPELINE_NOT_FOUND"


class WorkDirNotFound(UsageError):
    code = "DPONE_WORK_DIR_NOT_FOUND"


def check_name(name: str) -> str:
    """``name`` if it is a pipeline name; refused (without repeating it) otherwise."""
    if not PIPELINE_NAME.fullmatch(name):
        raise PipelineNameInvalid(
            "a pipeline name is 3 to 64 characters of [a-z0-9_]",
            fixes=("pass the manifest's name:, as `dpone pipeline list` prints it",),
        )
    return name


@frozen
class PipelineDirs:
    """The folders a pipeline's files live in."""

    work_dir: Path
    state_dir: Path
    runs_dir: Path
    evidence_dir: Path
    dlq_dir: Path
    #: the manifest's plan when the folders came from one (its sink, its strategy)
    plan: Plan | None = None

    @classmethod
    def of(
        cls, work_dir: PathLike | None = None, manifest: PathLike | Plan | None = None
    ) -> PipelineDirs:
        """From a work dir (the default layout) or a manifest (its own folders)."""
        if manifest is not None:
            from dpone.manifest.compiler import compile_manifest
            from dpone.manifest.plan import Plan

            plan = manifest if isinstance(manifest, Plan) else compile_manifest(os.fspath(manifest))
            work = plan.runtime.work_dir
            return cls(
                work,
                work / "state",
                work / "runs",
                Path(plan.sink.evidence_dir),
                Path(plan.sink.dlq.directory),
                plan,
            )
        if work_dir is None:
            raise UsageError(
                "name the pipeline's work dir",
                fixes=("pass --work-dir DIR (runtime.work_dir) or --manifest M",),
            )
        work = Path(work_dir)
        if not work.is_dir():
            raise WorkDirNotFound(
                f"{work} is not a folder",
                fixes=("pass the manifest's runtime.work_dir (by default .dpone next to it)",),
            )
        return cls(work, work / "state", work / "runs", work / "evidence", work / "dlq")

    def state_file(self, name: str) -> Path:
        return self.state_dir / f"{check_name(name)}.json"

    def journal_file(self, name: str) -> Path:
        return self.runs_dir / f"{check_name(name)}.journal.json"

    def lock_file(self, name: str) -> Path:
        return self.runs_dir / f"{check_name(name)}.lock"

    def evidence_of(self, name: str) -> Path:
        return self.evidence_dir / check_name(name)

    def names(self) -> list[str]:
        """Every pipeline the folders know of, by its state, journal or evidence; files
        whose names are not pipeline names are ignored."""
        found: set[str] = set()
        for entry in _entries(self.state_dir):
            if entry.name.endswith(".json") and entry.is_file(follow_symlinks=False):
                found.add(entry.name[: -len(".json")])
        for entry in _entries(self.runs_dir):
            if entry.name.endswith(".journal.json") and entry.is_file(follow_symlinks=False):
                found.add(entry.name[: -len(".journal.json")])
        for entry in _entries(self.evidence_dir):
            if entry.is_dir(follow_symlinks=False):
                found.add(entry.name)
        return sorted(n for n in found if PIPELINE_NAME.fullmatch(n))


def _entries(folder: Path) -> Iterator[os.DirEntry[str]]:
    if folder.is_symlink() or not folder.is_dir():
        return iter(())
    try:
        return iter(list(os.scandir(folder)))
    except OSError:
        return iter(())


class Unreadable(Exception):
    """A file that is not what dpone writes; ``why`` says how, without its content."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def read_plain(path: Path, limit: int) -> bytes | None:
    """The bytes of a regular file at ``path`` (not followed if it is a link), or None."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError:
        raise Unreadable("is a symbolic link or cannot be opened") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unreadable("is not a regular file")
        data = os.read(fd, limit + 1)
        while len(data) <= limit and (more := os.read(fd, limit + 1 - len(data))):
            data += more
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Unreadable("is larger than any such file dpone writes")
    return data


def evidence_docs(
    dirs: PipelineDirs, name: str
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """The pipeline's evidence bundles that verify (schema, checksum, their own pipeline and
    run), oldest first; and ``(folder, why)`` for each that does not."""
    folder = dirs.evidence_of(name)
    docs: list[dict[str, Any]] = []
    problems: list[tuple[str, str]] = []
    if folder.is_symlink():
        return [], [(name, "the pipeline's evidence folder is a symbolic link")]
    for entry in sorted(_entries(folder), key=lambda e: e.name):
        if not entry.is_dir(follow_symlinks=False):
            continue
        shown = entry.name if is_identifier(entry.name) else "(a folder with an unsafe name)"
        try:
            if not is_identifier(entry.name):
                raise Unreadable("is not named by a run id")
            doc = _evidence(Path(entry.path) / EVIDENCE_FILE, name, entry.name)
        except Unreadable as bad:
            problems.append((shown, f"its evidence {bad.why}"))
            continue
        if doc is not None:
            docs.append(doc)
    docs.sort(key=lambda d: (str(d["started_at"]), str(d["run_id"])))
    return docs, problems


def _evidence(path: Path, pipeline: str, run_id: str) -> dict[str, Any] | None:
    data = read_plain(path, MAX_EVIDENCE_BYTES)
    if data is None:
        return None
    doc = checked_document(data, EVIDENCE_SCHEMA, Unreadable)
    # A present signature is checked when a key is configured, as the release gate does.
    signed = signing.problem(doc, signing.keyring(), require=False, what="it")
    if signed is not None:
        raise Unreadable(f"has a signature that does not hold ({signed[0]})")
    if doc["pipeline"] != pipeline or doc["run_id"] != run_id:
        raise Unreadable("names another pipeline or run than its folder")
    return doc


__all__ = [
    "PIPELINE_NAME",
    "PipelineDirs",
    "PipelineNameInvalid",
    "PipelineNotFound",
    "Unreadable",
    "WorkDirNotFound",
    "check_name",
    "evidence_docs",
    "read_plain",
]
