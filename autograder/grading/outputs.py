"""A batch's outputs for TAs: grades.csv, one feedback file per student, summary.txt and
histogram.png, with leaderboard.csv and report.html from `autograder.grading.report`.

Why a module of its own: a whole batch (`batch.run`) and a merge of its shards (`shard.merge`)
write the same files from a `BatchResult` in memory, never from files a worker could have written.
"""
from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path

from autograder.authoring.assignments import Assignment
from autograder.grading import report as class_report
from autograder.grading import results, similarity
from autograder.grading.records import BatchResult, check_specs, report_from_dict, write_text
from autograder.grading.redaction import redact_report, secret_lines
from autograder.grading.results import clean
from autograder.grading.runner import Report
from autograder.grading.submissions import Entry, unique_names


def write_outputs(result: BatchResult, assignment: Assignment, out: Path, all_questions: list[str]) -> None:
    """grades.csv, feedback/<student>.txt, leaderboard.csv, report.html, summary.txt and histogram.png,
    all from `result` in memory.

    grades.csv first and on its own: a feedback file, the summary or another file that cannot be
    written is listed in `result.write_errors` and costs nothing else.
    """
    titles = assignment.questions
    specs = check_specs(assignment)
    extra = {spec.question for spec in specs if spec.extra}
    max_score = sum(spec.points for spec in specs if not spec.extra)
    export = any(entry.submission_id for entry in result.entries)  # Gradescope's ids, names and e-mails too
    secrets_ = secret_lines(assignment)
    rows, totals, per_question, per_check, feedback = [], [], {q: [] for q in all_questions}, {}, []
    # why a submission is missing from a mean: {question or "total": {reason: count}}, for the summary
    left_out: dict[str, dict[str, int]] = {q: {} for q in [*all_questions, "total"]}
    named = frozenset(name for spec in specs for name in (*spec.uses, *spec.needs))  # public: kept in messages
    failures: dict[tuple[str, str, str, str], list[str]] = {}  # (q, check, title, normalised message) -> students
    boards, members, students_rows = [], {}, []  # leaderboard entries per record key; its students; (id, total, status)

    def leave_out(reason: str, questions) -> None:
        for q in questions:
            left_out[q][reason] = left_out[q].get(reason, 0) + 1

    for entry in result.entries:
        record = result.records[entry.key]
        report = report_from_dict(record["report"]) if record.get("report") else None
        if report is not None:
            redact_report(results.sanitize(report), secrets_, entry.path)
        scores = {q: "" for q in all_questions}
        status, total = record["status"], ""
        if record.get("problem"):  # unreadable or another assignment's: 0, and out of the class statistics
            total, status = 0, record["problem"]
            leave_out(record["problem"], [*all_questions, "total"])
        elif record.get("missing"):
            scores = {q: 0 for q in all_questions}
            total, status = 0, "no file"
            totals.append(0.0)
            leave_out("no file", all_questions)
        elif report is not None:
            by_question: dict[str, float] = {}
            for r in report.results:
                by_question[r.question] = by_question.get(r.question, 0.0) + r.score
                per_check.setdefault((r.question, r.name, r.title), []).append(r.passed)
            scores.update({q: _num(s) for q, s in by_question.items()})
            total = _num(report.score)
            missing = [q for q in all_questions if q not in record.get("questions", [])]
            if missing:
                status = f"partial (not graded: Q{', Q'.join(missing)})"
                leave_out("partly graded", ["total"])
            else:
                totals.append(report.score)
            for q in all_questions:
                if q in by_question:
                    q_max = sum(r.max_score for r in report.results if r.question == q) or \
                        sum(spec.points for spec in specs if spec.question == q)
                    per_question[q].append((by_question[q], q_max))
                else:
                    leave_out("not graded yet", [q])
        else:
            status = f"error: {record.get('error', '')}"
            leave_out("could not be graded", [*all_questions, "total"])
        students = record.get("students", entry.students)
        if report is not None:
            for r in report.results:
                if not r.passed:
                    failures.setdefault((r.question, r.name, r.title, class_report.normalise(r.output, named)),
                                        []).extend(students)
            boards.append((entry.key, report.leaderboard))
            members[entry.key] = students
        people = entry.people if len(entry.people) == len(students) else [{}] * len(students)
        for sid, person in zip(students, people):
            who = [person.get("name", ""), person.get("email", ""), entry.submission_id] if export else []
            rows.append([sid, *who, entry.source, *[scores[q] for q in all_questions], total, _num(max_score),
                         status])
            feedback.append((sid, entry, record, report))
            students_rows.append((sid, str(total), status))
    rows.sort(key=lambda row: row[0])
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["student_id", *(["name", "email", "submission_id"] if export else []), "submission",
                     *[f"Q{q}" + (" (extra)" if q in extra else "") for q in all_questions], "total", "max", "status"])
    writer.writerows([[csv_cell(c) for c in row] for row in rows])
    write_text(out / "grades.csv", buf.getvalue())
    result.summary = summary_text(assignment, result, totals, per_question, per_check, max_score, titles, extra,
                                  left_out)
    feedback_dir = out / "feedback"
    names = unique_names([sid for sid, *_ in feedback])
    for sid, entry, record, report in feedback:
        _attempt(result, feedback_dir / f"{names[sid]}.txt",
                 lambda path: write_text(path, feedback_text(sid, entry, record, report, assignment)))
    ranked = class_report.ranked(boards)
    _attempt(result, out / "leaderboard.csv", lambda path: write_text(path, class_report.leaderboard_csv(ranked)))
    data = class_report.ClassReport(
        assignment=assignment, specs=specs, max_score=max_score, totals=totals, per_question=per_question,
        per_check=per_check, failures=failures, leaderboard=ranked, members=members,
        students=sorted((sid, total, status, class_report.feedback_href(f"{names[sid]}.txt"))
                        for sid, total, status in students_rows))
    data.similarity = similarity.in_batch(result, assignment)  # staff only: never in feedback; never raises
    _attempt(result, out / "similarity.csv", lambda path: write_text(path, similarity.csv_text(data.similarity)))
    _attempt(result, out / "report.html", lambda path: write_text(path, class_report.html_report(data)))
    if result.write_errors:
        result.summary += "\n" + "\n".join(f"could not write {e}" for e in result.write_errors)
    _attempt(result, out / "summary.txt", lambda path: write_text(path, result.summary + "\n"))
    _attempt(result, out / "histogram.png",
             lambda path: histogram(totals, per_question, max_score, assignment, path, titles))


def _attempt(result: BatchResult, path: Path, write) -> None:
    """Write one output file; a failure is listed, never raised (the other files still appear)."""
    try:
        write(path)
    except Exception as exc:  # noqa: BLE001 - one file's problem is that file's alone
        result.write_errors.append(clean(f"{path}: {type(exc).__name__}: {exc}"))


def csv_cell(value):
    """A grades.csv cell that a spreadsheet shows as text: a leading = + - @ (or tab, CR) would make it
    a live formula (`=HYPERLINK(...)` as a folder name), so such text gets a leading quote."""
    if not isinstance(value, str):
        return value
    value = clean(value)
    return "'" + value if value[:1] in ("=", "+", "-", "@", "\t", "\r") else value


def _num(x: float) -> str:
    return f"{x:g}"


def feedback_text(student: str, entry: Entry, record: dict, report: Report | None, assignment: Assignment) -> str:
    head = [f"{assignment.title} ({assignment.id}): feedback for {student}", f"Submission: {Path(entry.source).name}"]
    if entry.note:
        head.append(f"Note: {entry.note}")
    if record.get("problem"):
        return "\n".join(head + ["", f"Nothing could be graded: {record.get('message', '')}", "Score: 0"]) + "\n"
    if record.get("missing"):
        return "\n".join(head + ["", record["missing"], "Score: 0"]) + "\n"
    if report is None:
        return "\n".join(head + ["", "This submission could not be graded yet; the course staff will look at it.",
                                 f"({record.get('error', '')})"]) + "\n"
    passed = [f"  ok Q{r.question} {r.title}" for r in report.results if r.passed]
    return "\n".join(head + ["", results.format_table(report, assignment.questions, details=True), "",
                             "Passed checks:" if passed else "No check passed.", *passed]) + "\n"


def summary_text(assignment, result: BatchResult, totals, per_question, per_check, max_score, titles, extra,
                 left_out=None) -> str:
    """The batch in a few lines. Every mean says what it is over: which submissions it counts and
    which it leaves out (unreadable, no file, ...), so "mean 4.2" is never read as the class's mean."""
    left_out = left_out or {}
    if result.merged:
        lines = [f"{assignment.id}: {len(result.entries)} submissions, merged from {result.merged} shard"
                 f"{'s' if result.merged != 1 else ''}; graded {result.graded}, could not be graded {len(result.errors)}"]
    else:
        lines = [f"{assignment.id}: {len(result.entries)} submissions; graded now {result.graded}, "
                 f"unchanged since the last run {result.skipped}, could not be graded {len(result.errors)}"]
    if totals:
        no_file = sum(1 for e in result.entries if result.records.get(e.key, {}).get("missing"))
        over = f"over these {len(totals)}" + (f", {no_file} with no file as 0" if no_file else "")
        if left_out.get("total"):
            over += f" ({_excluded(left_out['total'])})"
        lines.append(f"{len(totals)} with every question graded; total (of {max_score:g}) {over}: "
                     f"mean {statistics.mean(totals):.2f}, median {statistics.median(totals):g}, "
                     f"min {min(totals):g}, max {max(totals):g}, full marks {sum(t >= max_score for t in totals)}")
    lines.append("per question (the mean over the submissions graded on it):")
    for q, pairs in per_question.items():
        if not pairs:
            continue
        mean = statistics.mean(s for s, _ in pairs)
        full = sum(s >= m for s, m in pairs) / len(pairs)
        label = titles.get(q, "") + (" (extra)" if q in extra else "")
        over = f"over {len(pairs)} graded submission{'s' if len(pairs) != 1 else ''}"
        if left_out.get(q):
            over += f" ({_excluded(left_out[q])})"
        lines.append(f"  {'Q' + q:<4} {label[:40]:<40} mean {mean:5.2f}/{pairs[0][1]:<4g} {over}; full marks {full:.0%}")
    hardest = sorted(per_check.items(), key=lambda kv: (sum(kv[1]) / len(kv[1]), kv[0][1]))[:5]
    if hardest and any(not all(v) for _, v in hardest):
        lines.append("checks failed most often:")
        for (q, name, title), passes in hardest:
            if not all(passes):
                lines.append(f"  Q{q} {title} [{name}]: {len(passes) - sum(passes)} of {len(passes)} failed")
    problems: dict[str, list[str]] = {}
    for entry in result.entries:
        record = result.records.get(entry.key, {})
        if record.get("problem"):
            problems.setdefault(record["problem"], []).append(", ".join(entry.students))
    for status, who in sorted(problems.items()):
        lines.append(f"{status} (0, left out of the statistics above): {len(who)}: {some(who)}")
    links = [link for entry in result.entries for link in entry.links]
    if links:
        lines.append(f"skipped {len(links)} symbolic link(s), never followed or graded: {some(links)}")
    for error in result.errors:
        lines.append(f"could not grade {error}")
    return "\n".join(lines)


def _excluded(reasons: dict[str, int]) -> str:
    """{"unreadable": 3, "no file": 1} -> "3 unreadable, 1 no file excluded"."""
    return ", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items())) + " excluded"


def some(items: list[str], shown: int = 10) -> str:
    return ", ".join(items[:shown]) + (f" and {len(items) - shown} more" if len(items) > shown else "")


def histogram(totals, per_question, max_score, assignment, path: Path, titles) -> None:
    """Totals on the left, mean score per question (as % of its points) on the right."""
    fig = histogram_figure(totals, per_question, max_score, assignment)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    results.write_bytes(path, buf.getvalue())


def histogram_figure(totals, per_question, max_score, assignment):
    """The histogram as a matplotlib Figure (no pyplot: no display, no global state).

    The count axis has whole-number ticks only: with a small section, matplotlib's default would
    label it 0.25, 0.5, ... submissions."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(10, 4), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    bins = max(5, min(30, int(max_score) + 1))
    left.hist(totals, bins=bins, range=(0, max(max_score, max(totals, default=0))), color="#4477aa", edgecolor="white")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel(f"total score (of {max_score:g})")
    left.set_ylabel("submissions")
    left.set_title(f"{assignment.id}: {len(totals)} fully graded submissions")
    qs = [q for q, pairs in per_question.items() if pairs]
    means = [100 * statistics.mean(s / m if m else 0 for s, m in per_question[q]) for q in qs]
    right.bar([f"Q{q}" for q in qs], means, color="#cc6677")
    right.set_ylim(0, 100)
    right.set_ylabel("mean score, % of the question's points")
    right.set_title("where students lose points")
    return fig
