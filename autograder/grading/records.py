"""What a batch graded, kept for resuming: one JSON record per submission under
OUT/.lmgrade/records, the digests that say whether a record still holds (same file, same checks),
and `BatchResult`, a batch's records in memory.

Why a module of its own: `batch.run` writes records, `shard.merge` reads and checks them and
`outputs.write_outputs` writes grades.csv from them. Kept out of batch.py, they leave shard.py
(which batch.py imports) nothing to import from batch.py: no import cycle.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring.assignments import Assignment
from autograder.grading import results
from autograder.grading.runner import CheckResult, Report
from autograder.grading.submissions import Entry

RECORD_VERSION = 2  # 2: keys that never collide, records saved as each submission finishes


def check_specs(assignment: Assignment) -> list:
    """The declarations (question, points, ...) of the assignment's checks."""
    return assignment.check_specs()


def file_digest(path: Path | None) -> str:
    if path is None:
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checks_digest(assignment: Assignment) -> str:
    """Changes whenever the checks, their fixtures, limits or the reference change: then regrade."""
    digest = hashlib.sha256()
    for path in (assignment.dir / "public_checks.py", assignment.dir / "hidden_checks.py", assignment.dir / "meta.toml",
                 assignment.fixtures_path, assignment.reference_path):
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"") + b"\0")
    return digest.hexdigest()[:24]


def report_to_dict(report: Report) -> dict:
    return dataclasses.asdict(report)


def report_from_dict(doc: dict) -> Report:
    names = {f.name for f in dataclasses.fields(CheckResult)}
    checks = [CheckResult(**{k: v for k, v in r.items() if k in names}) for r in doc.get("results", [])]
    keep = {f.name for f in dataclasses.fields(Report)} - {"results"}
    return Report(results=checks, **{k: v for k, v in doc.items() if k in keep})


def write_text(path: Path, text: str) -> None:
    """Atomic (readers see the old file or the whole new one), group-readable, never fatal on odd text."""
    results.write_text(path, text)


def load_records(folder: Path) -> dict[str, dict]:
    records = {}
    if folder.is_dir():
        for path in folder.glob("*.json"):
            try:
                doc = json.loads(path.read_text())
                if doc.get("version") == RECORD_VERSION and type(doc.get("key")) is str:
                    records[doc["key"]] = doc
            except (OSError, ValueError, RecursionError, AttributeError):
                continue  # a damaged record: that submission is graded again
    return records



@dataclass
class BatchResult:
    entries: list[Entry]
    records: dict[str, dict]  # key -> record, for every entry
    graded: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    summary: str = ""
    write_errors: list[str] = field(default_factory=list)  # output files that could not be written
    shard: tuple[int, int] | None = None  # (K, N) of `--shard K/N`: `entries` are that part only
    merged: int = 0  # `lmgrade merge`: the number of shards these records come from
    notes: list[str] = field(default_factory=list)  # `lmgrade merge`: what it left aside
