"""Redaction: no text of the grader's files (reference, hidden checks, authored source) in feedback.

Why a module of its own: a batch's feedback files (`outputs`) and `lmgrade check`'s report
(`autograder.cli`) are both redacted, and neither needs the rest of the batch for it.
"""
from __future__ import annotations

from pathlib import Path

from autograder.authoring.assignments import Assignment
from autograder.grading.runner import Report
from autograder.sandbox import extract

REDACTED = "[hidden: text from the grader's files]"
MIN_SECRET_LINE = 24  # shorter lines (`return counts`) are too common to count as leaked


def secret_lines(assignment: Assignment) -> set[str]:
    """Lines of the reference, hidden checks and authored source that students never see.

    Why: where the worker runs as the grader's own user without Landlock, it can read these
    files and print them; feedback then shows the reader a placeholder instead. A speed bump
    (re-encoded text passes), not the protection: that is a separate user or Landlock.
    """
    secret_files = [assignment.reference_path] + [p for p in sorted(assignment.dir.rglob("*")) if p.is_file()
                                                  and p.name not in ("public_checks.py", "public_fixtures.json")]
    public_text = ""
    for path in (assignment.dir / "public_checks.py", assignment.starter_path):
        if path.exists():
            public_text += path.read_text(errors="replace")
    if assignment.starter_path.exists():  # cell sources, not the JSON-escaped text
        try:
            nb = extract.read_notebook(assignment.starter_path)
            public_text += "\n".join("".join(c.get("source", "")) for c in nb.get("cells", []))
        except ValueError:
            pass
    public = {line.strip() for line in public_text.splitlines()}
    lines = set()
    for path in secret_files:
        if path.exists() and path.stat().st_size < 5 << 20:
            lines |= {s for s in (line.strip() for line in path.read_text(errors="replace").splitlines())
                      if len(s) >= MIN_SECRET_LINE and s not in public}
    return lines


def own_lines(path: Path) -> set[str]:
    """Every stripped line of a submission's code, all cells of a notebook included."""
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return set()
    if path.suffix.lower() == ".ipynb":
        try:
            cells = extract.parse_notebook(text)["cells"]
            text = "\n".join("".join(map(str, c["source"])) if isinstance(c.get("source"), list)
                             else str(c.get("source", "")) for c in cells if isinstance(c, dict))
        except (ValueError, AttributeError, TypeError, KeyError):
            pass
    return {line.strip() for line in text.splitlines()}


def redact_report(report: Report, secrets_: set[str], submission: Path | None = None) -> Report:
    """Replace every secret line found in feedback and notes, except lines the submission itself
    contains (showing a student their own code reveals nothing, and that avoids an oracle)."""
    if submission is not None:
        secrets_ = secrets_ - own_lines(submission)
    if not secrets_:
        return report

    def clean(text: str) -> str:
        for line in secrets_:
            if line in text:
                text = text.replace(line, REDACTED)
        return text

    for r in report.results:
        r.output = clean(r.output)
    report.notes = [clean(n) for n in report.notes]
    return report
