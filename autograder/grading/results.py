"""Reports as people and Gradescope read them: a per-question table and results.json.

Why our own writer: gradescope-utils' JSONTestRunner drops skipped tests and failing subTests and
leaves an empty file when setUpClass fails. Here every check is one entry, and `write_json` always
leaves a valid file, even when grading itself failed.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tempfile
import textwrap
from pathlib import Path

from autograder.checking.checks import leaderboard_entry
from autograder.grading.runner import Report

FIELD_LIMIT = 50_000  # Gradescope truncates text fields at 100,000 characters
# C0 and C1 control characters but tab and newline: terminal escapes, carriage returns that hide a line
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text) -> str:
    """Text from a worker or a file name, made safe for files, CSV cells and the TA's terminal.

    Why: a lone surrogate (a printed "\\ud800", a non-UTF-8 file name) cannot be encoded, and one
    such string used to stop results.json, grades.csv and the summary for the whole batch; an
    escape sequence printed by student code would reach the TA's terminal. Unencodable characters
    become "?", control characters (but tab and newline) become visible escapes.
    """
    if not isinstance(text, str):
        text = str(text)
    text = text.encode("utf-8", "replace").decode("utf-8")
    if _CONTROL.search(text):
        text = _CONTROL.sub(lambda m: "\\r" if m.group() == "\r" else f"\\x{ord(m.group()):02x}",
                            text.replace("\r\n", "\n"))
    return text


def sanitize(report: Report) -> Report:
    """Every string of a report cleaned in place (see `clean`): call it where a report enters the
    trusted side, before anything is written or printed."""
    report.assignment, report.submission, report.device = (clean(report.assignment), clean(report.submission),
                                                           clean(report.device))
    report.notes = [clean(n) for n in report.notes]
    for r in report.results:
        for f in dataclasses.fields(r):
            value = getattr(r, f.name)
            if isinstance(value, str):
                setattr(r, f.name, clean(value))
        r.published = _entries(r.published) if r.passed else []
    return report


def _entries(published) -> list[dict]:
    """The valid leaderboard entries of a check (a record read from disk may hold anything)."""
    kept = []
    for e in published if isinstance(published, list) else ():
        try:
            entry = leaderboard_entry(e["name"], e["value"], e["order"], e["held_out"])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(entry["value"]) and entry["name"] not in {k["name"] for k in kept}:
            kept.append(entry)
    return kept


def _umask() -> int:
    """The process umask, without the set-and-restore dance where /proc tells it (threads may be
    creating files meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def file_mode() -> int:
    """Mode for files the grader writes: what the umask allows, but never owner-only (a TA's group
    reads grades and feedback, as it reads histogram.png)."""
    return (0o666 & ~_umask()) | 0o640


def make_dir(path: str | Path) -> Path:
    """mkdir -p; the folders it creates are group-readable and searchable whatever the umask
    (see `file_mode`). Folders that exist already are left as they are."""
    path = Path(path)
    created = []
    for folder in [path, *path.parents]:
        if folder.exists():
            break
        created.append(folder)
    path.mkdir(parents=True, exist_ok=True)
    umask = _umask()
    for folder in created:
        try:
            os.chmod(folder, (0o777 & ~umask) | 0o750)
        except OSError:
            pass
    return path


def write_text(path: str | Path, text: str) -> None:
    """Atomic (readers see the old file or the whole new one), UTF-8, group-readable."""
    write_bytes(path, text.encode("utf-8", errors="replace"))


def write_bytes(path: str | Path, data: bytes) -> None:
    """Atomic and group-readable (mkstemp alone makes 0600 files)."""
    path = Path(path)
    make_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), file_mode())
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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


TITLE_WIDTH = (24, 48)  # the question column: at least, at most (longer titles wrap onto more lines)
LINE_WIDTH = 80  # the table's rows fit a terminal and Gradescope's output box


def format_table(report: Report, titles: dict[str, str], *, details: bool = True) -> str:
    """The per-question table, then the failures. Why wrap rather than cut: "Attention and the
    Transformer bloc" names no question. The title column fits the longest title up to 48
    characters, so a row stays within 80 columns (a terminal, Gradescope's output box); a longer
    title wraps at word boundaries onto indented lines of its own."""
    sanitize(report)
    rows = question_rows(report, titles)
    width = min(max([TITLE_WIDTH[0], *(len(title) for _, title, *_ in rows)]), TITLE_WIDTH[1])
    q_width = max([3, *(len(q) for q, *_ in rows)])
    lines = [f"{report.assignment}: {Path(report.submission).name}  (device {report.device}, "
             f"{report.execution_time:.1f} s)"]
    lines += [f"  note: {n}" for n in report.notes]
    lines.append(f"  {'Q':<{q_width}} {'question':<{width}} {'score':>11}  checks")
    for q, title, score, max_score, passed, n, extra in rows:
        shown = f"{'+' if extra else ''}{_num(score)}"
        first, *rest = textwrap.wrap(title, width, break_on_hyphens=False) or [""]
        lines.append(f"  {q:<{q_width}} {first:<{width}} {shown:>5}/{_num(max_score):<5}  {passed}/{n}")
        lines += [f"  {'':<{q_width}} {more}" for more in rest]
    extra = sum(r.score for r in report.results if r.extra)
    total = f"  {'':<{q_width}} {'total':<{width}} {_num(report.score):>5}/{_num(report.max_score):<5}"
    note = f"(includes {_num(extra)} extra credit)" if extra else ""
    if note and len(total) + 2 + len(note) > LINE_WIDTH:
        lines += [total, f"  {'':<{q_width}} {note}"]
    else:
        lines.append(total + (f"  {note}" if note else ""))
    if details:
        for r in report.results:
            if not r.passed:
                body = r.output.replace("\n", "\n      ")
                lines.append(f"  x Q{r.question} {r.title} [{r.name}]\n      {body}")
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:g}"


def gradescope_json(report: Report, held_out_leaderboard: bool = False) -> dict:
    sanitize(report)
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
    doc = {"score": round(report.score, 4), "execution_time": round(report.execution_time, 3),
           "output": _clip("\n".join(report.notes)), "visibility": "visible", "tests": tests}
    board = gradescope_leaderboard(report, held_out_leaderboard)
    if board:
        doc["leaderboard"] = board
    return doc


def gradescope_leaderboard(report: Report, held_out: bool = False) -> list[dict]:
    """Gradescope's top-level `leaderboard`: [{name, value, order}] of the metrics checks that passed
    published, `order` always written (Gradescope's default is "desc", ours "asc").

    Why held-out metrics stay out unless course staff opt in (`lmgrade gradescope build
    --leaderboard`): students see Gradescope's leaderboard as soon as they submit, and by default
    nothing derived from a hidden input reaches them before the deadline; those metrics are in the
    TA's leaderboard.csv and report.html either way. Opted in, they go out rounded to 3 significant
    digits, a coarse number per submission.
    """
    return [{"name": e["name"], "value": float(f"{e['value']:.3g}") if e["held_out"] else e["value"],
             "order": e["order"]} for e in report.leaderboard if held_out or not e["held_out"]]


def failure_json(message: str) -> dict:
    """What Gradescope gets when grading could not run at all: a valid file that says why."""
    return {"score": 0.0, "execution_time": 0.0, "visibility": "visible", "tests": [],
            "output": _clip("The autograder could not grade this submission: " + clean(message))}


def problem_json(message: str) -> dict:
    """A submission that cannot be graded as submitted (unreadable, another assignment's notebook):
    score 0 and one message, instead of the same failure repeated under every check."""
    return {"score": 0.0, "execution_time": 0.0, "visibility": "visible", "tests": [], "output": _clip(clean(message))}


def write_json(doc: dict, path: str | Path) -> None:
    """Atomic write: the file is either the old one or the complete new one, never half."""
    write_text(path, json.dumps(doc, indent=1))  # ensure_ascii: a lone surrogate is escaped, never fatal


def _clip(text: str) -> str:
    return text if len(text) <= FIELD_LIMIT else text[:FIELD_LIMIT] + "\n... (truncated)"
