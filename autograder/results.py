"""Reports as people and Gradescope read them: a per-question table and results.json.

Why our own writer: gradescope-utils' JSONTestRunner drops skipped tests and failing subTests and
leaves an empty file when setUpClass fails. Here every check is one entry, and `write_json` always
leaves a valid file, even when grading itself failed.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from autograder.runner import Report

FIELD_LIMIT = 50_000  # Gradescope truncates text fields at 100,000 characters


def question_rows(report: Report, titles: dict[str, str]) -> list[tuple[str, str, float, float, int, int, bool]]:
    """(question, title, score, max, passed checks, checks, extra credit) in question order."""
    rows: dict[str, list] = {}
    for r in report.results:
        row = rows.setdefault(r.question, [r.question, titles.get(r.question, ""), 0.0, 0.0, 0, 0, True])
        row[2] += r.score
        row[3] += r.max_score
        row[4] += r.passed
        row[5] += 1
        row[6] &= r.extra
    return [tuple(row) for row in sorted(rows.values(), key=lambda row: _qkey(row[0]))]


def _qkey(question: str):
    return [int(p) if p.isdigit() else p for p in question.replace("-", ".").split(".")]


def format_table(report: Report, titles: dict[str, str], *, details: bool = True) -> str:
    lines = [f"{report.assignment}: {Path(report.submission).name}  (device {report.device}, "
             f"{report.execution_time:.1f} s)"]
    lines += [f"  note: {n}" for n in report.notes]
    lines.append(f"  {'Q':<4} {'question':<34} {'score':>11}  checks")
    for q, title, score, max_score, passed, n, extra in question_rows(report, titles):
        shown = f"{'+' if extra else ''}{_num(score)}"
        lines.append(f"  {q:<4} {title[:34]:<34} {shown:>5}/{_num(max_score):<5}  {passed}/{n}")
    extra = sum(r.score for r in report.results if r.extra)
    lines.append(f"  {'':<4} {'total':<34} {_num(report.score):>5}/{_num(report.max_score):<5}"
                 + (f"  (includes {_num(extra)} extra credit)" if extra else ""))
    if details:
        for r in report.results:
            if not r.passed:
                body = r.output.replace("\n", "\n      ")
                lines.append(f"  x Q{r.question} {r.title} [{r.name}]\n      {body}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:g}"


def gradescope_json(report: Report) -> dict:
    tests = []
    for r in report.results:
        tests.append({
            "name": f"Q{r.question} {r.title}" + (" (extra credit)" if r.extra else ""),
            "number": r.question,
            "score": r.score,
            "max_score": 0.0 if r.extra else r.max_score,
            "status": "passed" if r.passed else "failed",
            "output": _clip(r.output),
            "visibility": "visible" if r.public else "after_published",
        })
    return {"score": round(report.score, 4), "execution_time": round(report.execution_time, 3),
            "output": _clip("\n".join(report.notes)), "visibility": "visible", "tests": tests}


def failure_json(message: str) -> dict:
    """What Gradescope gets when grading could not run at all: a valid file that says why."""
    return {"score": 0.0, "execution_time": 0.0, "visibility": "visible", "tests": [],
            "output": _clip("The autograder could not grade this submission: " + message)}


def write_json(doc: dict, path: str | Path) -> None:
    """Atomic write: the file is either the old one or the complete new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".results-")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


def _clip(text: str) -> str:
    return text if len(text) <= FIELD_LIMIT else text[:FIELD_LIMIT] + "\n... (truncated)"
