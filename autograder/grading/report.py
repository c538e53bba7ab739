"""What a batch tells TAs about the class beside grades.csv: leaderboard.csv and report.html.

Why a module of its own: both are views of the whole class, built by `outputs.write_outputs` from
the records it holds in memory (never from files a worker could have written), and both must be
the same bytes whether one run or `lmgrade merge` of shards wrote them: nothing here shows a
timing, a date or how many submissions were graded "now".

report.html is one file a TA opens from disk or mails around: inline CSS and SVG, no script, no
network, every piece of text escaped, and a Content-Security-Policy that would stop a script
even if one slipped in. Failure messages are grouped by what the mistake looks like (first line,
numbers and quoted values replaced by placeholders), so that the same bug groups together and no
hidden input or reference value appears in a report that may be shown to the class.
"""
from __future__ import annotations

import builtins
import csv
import html
import io
import re
import statistics
from dataclasses import dataclass, field
from urllib.parse import quote

import numpy as np

from autograder.grading import similarity

FAILURES_SHOWN = 30  # groups of failure messages in report.html, the commonest first
NAMES_SHOWN = 12  # students listed (linked) per failure group
MESSAGE_LIMIT = 300  # characters of a normalised message

# a quoted span: opened after no word character and closed before none, so "don't" is no quote
_QUOTED = re.compile(r"""(?<!\w)(['"`])(.+?)\1(?!\w)""")
# a number that is not part of a name (float32, Q3 and W_q2 stay as they are)
_NUMBER = re.compile(r"(?<![A-Za-z_\d.])[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_RUN = re.compile(r"<(n|text)>(?:,?\s*<(?:n|text)>)+")  # [<n>, <n>, <n>] and [<n>, <n>] group together


# What the grader writes around text that the student's code chose (its exception's type and text,
# a value it returned that the grader could not read): the grader's words are kept, the rest goes.
# `label raised Type: text`, "... raised Type: text before reaching it" (autograder.checking.remote, runner)
_RAISED = re.compile(r"\braised (\S+?):? .*$|\braised (\S+)$")
_STUB = re.compile(r"\bis not implemented yet\b.*$")  # the starter's `raise NotImplementedError`
_UNREADABLE = re.compile(r"\breturned a value the grader cannot read\b.*$")
_WIRE = re.compile(r"\b(unreadable reply|sent something unreadable) \(.*$")  # the decoder's words on worker bytes
_TYPE_NAME = re.compile(r"<(?!(?:n|text)>)[^<>]*>")  # "<NGramLM>.prob(...)": a type name the worker reported
STUB_TEXT = "is not implemented yet (the starter's stub)"
# exception types the grader names in a group: Python's own, a fixed list; any other name a class could have
_BUILTIN_ERRORS = frozenset(name for name, value in vars(builtins).items()
                            if isinstance(value, type) and issubclass(value, BaseException))


def normalise(message: str, names: frozenset[str] = frozenset()) -> str:
    """The grader's own words of a failure message's first line: numbers as <n>, quoted values as
    <text>, and nothing the student's code chose.

    `names` are the student functions the checks name (`tokenize`): public, so a backquoted one
    stays; anything else quoted may be a hidden input and goes. Text the student's code made is cut
    at the grader's words around it: `tokenize(<text>) raised ValueError` keeps a built-in exception's
    name and drops its text (which can carry a hidden input the function was given: a student's
    `raise ValueError(line)` would otherwise publish it); any other exception type is `an exception`;
    a type name the worker reported (`<NGramLM>`) is `<object>`.
    """
    line = message.strip().split("\n", 1)[0].strip()
    line = _STUB.sub(STUB_TEXT, line)
    line = _UNREADABLE.sub("returned a value the grader cannot read", line)
    line = _WIRE.sub(r"\1", line)
    line = _RAISED.sub(lambda m: "raised " + _error_name(m.group(1) or m.group(2)), line)
    line = _TYPE_NAME.sub("<object>", line)
    line = _QUOTED.sub(lambda m: m.group(0) if m.group(1) == "`" and m.group(2) in names else "<text>", line)
    line = _RUN.sub(r"<\1>, ...", _NUMBER.sub("<n>", line))
    return line if len(line) <= MESSAGE_LIMIT else line[:MESSAGE_LIMIT] + "..."


def _error_name(name: str) -> str:
    return name if name in _BUILTIN_ERRORS else "an exception"


# ---- the leaderboard ---------------------------------------------------------------------------
def ranked(boards: list[tuple[str, list[dict]]]) -> list[dict]:
    """One row per (student key, metric), ranked per metric: {metric, order, rank, student, value, held_out}.

    `boards` are (record key, `Report.leaderboard`). Metrics come in name order; ties share a rank
    (1, 1, 3) and are listed by key, so the rows do not depend on the order records were read in.
    """
    by_metric: dict[tuple[str, str], list[tuple[str, dict]]] = {}
    for key, entries in boards:
        for e in entries:
            by_metric.setdefault((e["name"], e["order"]), []).append((key, e))
    rows = []
    for (name, order), found in sorted(by_metric.items()):
        sign = 1.0 if order == "asc" else -1.0
        found.sort(key=lambda pair: (sign * pair[1]["value"], pair[0]))
        for key, e in found:
            rank = 1 + sum(1 for _, other in found if sign * other["value"] < sign * e["value"])
            rows.append({"metric": name, "order": order, "rank": rank, "student": key, "value": e["value"],
                         "held_out": e["held_out"]})
    return rows


def leaderboard_csv(rows: list[dict]) -> str:
    """leaderboard.csv; `held_out` yes: measured on data students never see (not on Gradescope's board)."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["metric", "order", "rank", "student", "value", "held_out"])
    for row in rows:
        writer.writerow([_cell(row["metric"]), row["order"], row["rank"], _cell(row["student"]), repr(row["value"]),
                         "yes" if row["held_out"] else "no"])
    return buf.getvalue()


def _cell(text: str) -> str:
    """As outputs.csv_cell: no text a spreadsheet would run as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


# ---- report.html -------------------------------------------------------------------------------
@dataclass
class ClassReport:
    """Everything report.html shows, gathered by `outputs.write_outputs` as it writes grades.csv."""

    assignment: object  # assignments.Assignment
    specs: list  # the assignment's CheckSpecs, in order
    max_score: float
    totals: list[float]  # of the submissions with every question graded (as histogram.png)
    per_question: dict[str, list[tuple[float, float]]]  # question -> (score, max) per graded submission
    per_check: dict[tuple[str, str, str], list[bool]]  # (question, name, title) -> passed, per submission
    students: list[tuple[str, str, str, str]]  # (student id, total, status, feedback file relative to OUT)
    failures: dict[tuple[str, str, str, str], list[str]] = field(default_factory=dict)  # (q, name, title, message)
    leaderboard: list[dict] = field(default_factory=list)  # `ranked` rows
    members: dict[str, list[str]] = field(default_factory=dict)  # record key -> its student ids
    similarity: object = None  # similarity.Findings (staff only), set by outputs.write_outputs


def html_report(data: ClassReport) -> str:
    a = data.assignment
    links = {sid: href for sid, _, _, href in data.students}
    parts = [_HEAD.format(title=_e(f"{a.title} ({a.id}): class report")),
             f"<h1>{_e(a.title)} <small>({_e(a.id)})</small>: class report</h1>",
             _overview(data), "<h2 id='histogram'>Scores</h2>", histogram_svg(data.totals, data.max_score),
             _questions(data), _checks(data), _failures(data, links), _leaderboard(data, links),
             similarity.html_section(data.similarity, links), _students(data),
             "</body></html>\n"]
    return "\n".join(parts)


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em; }}
th, td {{ border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }}
td.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
code {{ font-size: 13px; }}
.bar {{ display: inline-block; height: .8em; background: #4477aa; vertical-align: middle; }}
.hidden {{ color: #aa3377; }}
.note {{ color: #555; }}
</style></head><body>"""


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _link(sid: str, links: dict[str, str]) -> str:
    href = links.get(sid)
    return f"<a href=\"{_e(href)}\">{_e(sid)}</a>" if href else _e(sid)


def _pct(part: float, whole: float) -> str:
    share = part / whole if whole else 0.0
    return f"<span class='bar' style='width:{60 * share:.1f}px'></span> {share:.0%}"


def _num(x: float) -> str:
    return f"{x:g}"


def _overview(data: ClassReport) -> str:
    statuses: dict[str, int] = {}
    for _, _, status, _ in data.students:
        kind = status.split(":")[0].split(" (")[0]  # "error: ...", "partial (not graded: Q3)"
        statuses[kind] = statuses.get(kind, 0) + 1
    lines = [f"{len(data.students)} students: " + ", ".join(f"{n} {kind}" for kind, n in sorted(statuses.items()))]
    if data.totals:
        t = data.totals
        lines.append(f"total (of {_num(data.max_score)}) over the {len(t)} with every question graded: mean "
                     f"{statistics.mean(t):.2f}, median {statistics.median(t):g}, min {min(t):g}, max {max(t):g}, "
                     f"full marks {sum(x >= data.max_score for x in t)}")
    return "".join(f"<p>{_e(line)}</p>" for line in lines)


def histogram_svg(totals: list[float], max_score: float) -> str:
    """Totals in the bins of histogram.png, as an inline SVG with whole-number counts."""
    width, height, left, right, top, bottom = 720, 260, 48, 12, 12, 44
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' role='img' "
           f"aria-label='histogram of total scores'>"]
    if not totals:
        out.append(f"<text x='{left}' y='{height // 2}'>no submission has every question graded yet</text></svg>")
        return "".join(out)
    bins = max(5, min(30, int(max_score) + 1))
    counts, edges = np.histogram(totals, bins=bins, range=(0, max(max_score, max(totals)) or 1))
    peak = int(counts.max())
    step = max(1, -(-peak // 5))
    ymax = step * -(-peak // step)
    bar_w = plot_w / bins
    for y in range(0, ymax + 1, step):
        py = top + plot_h - plot_h * y / ymax
        out.append(f"<line x1='{left}' x2='{width - right}' y1='{py:.1f}' y2='{py:.1f}' stroke='#ddd'/>"
                   f"<text x='{left - 6}' y='{py + 4:.1f}' text-anchor='end' font-size='11'>{y}</text>")
    for i, n in enumerate(counts):
        h = plot_h * int(n) / ymax
        out.append(f"<rect x='{left + i * bar_w + 1:.1f}' y='{top + plot_h - h:.1f}' width='{bar_w - 2:.1f}' "
                   f"height='{h:.1f}' fill='#4477aa'><title>{edges[i]:.3g} to {edges[i + 1]:.3g}: {int(n)} "
                   f"submission{'s' if n != 1 else ''}</title></rect>")
    every = max(1, bins // 10)
    for i in range(0, bins + 1, every):
        out.append(f"<text x='{left + i * bar_w:.1f}' y='{top + plot_h + 16}' text-anchor='middle' "
                   f"font-size='11'>{edges[i]:.3g}</text>")
    out.append(f"<text x='{left + plot_w / 2:.0f}' y='{height - 6}' text-anchor='middle' font-size='12'>total score "
               f"(of {_num(max_score)}), {len(totals)} submissions with every question graded</text>"
               f"<text x='12' y='{top + plot_h / 2:.0f}' transform='rotate(-90 12 {top + plot_h / 2:.0f})' "
               f"text-anchor='middle' font-size='12'>submissions</text></svg>")
    return "".join(out)


def _questions(data: ClassReport) -> str:
    titles = data.assignment.questions
    rows = []
    for q, pairs in data.per_question.items():
        if not pairs:
            continue
        full = sum(s >= m for s, m in pairs)
        rows.append(f"<tr><td>Q{_e(q)}</td><td>{_e(titles.get(q, ''))}</td><td class='num'>{len(pairs)}</td>"
                    f"<td class='num'>{statistics.mean(s for s, _ in pairs):.2f} / {_num(pairs[0][1])}</td>"
                    f"<td>{_pct(full, len(pairs))}</td></tr>")
    return ("<h2 id='questions'>Questions</h2><p class='note'>Pass rate: full marks on the question, over the "
            "submissions graded on it.</p><table><tr><th>Q</th><th>question</th><th>graded</th><th>mean</th>"
            "<th>pass rate</th></tr>" + "".join(rows) + "</table>")


def _checks(data: ClassReport) -> str:
    order = {spec.name: i for i, spec in enumerate(data.specs)}
    public = {spec.name: spec.public for spec in data.specs}
    rows = []
    for (q, name, title), passes in sorted(data.per_check.items(), key=lambda kv: order.get(kv[0][1], len(order))):
        kind = "public" if public.get(name, False) else "<span class='hidden'>hidden</span>"
        rows.append(f"<tr><td>Q{_e(q)}</td><td>{_e(title)} <code>[{_e(name)}]</code></td><td>{kind}</td>"
                    f"<td class='num'>{sum(passes)} / {len(passes)}</td><td>{_pct(sum(passes), len(passes))}</td></tr>")
    return ("<h2 id='checks'>Checks</h2><table><tr><th>Q</th><th>check</th><th></th><th>passed</th>"
            "<th>pass rate</th></tr>" + "".join(rows) + "</table>")


def _failures(data: ClassReport, links: dict[str, str]) -> str:
    """The commonest mistakes; checks that failed only because a function was still the starter's
    stub are counted apart, so that in a small batch they do not fill the list."""
    everything = sorted(data.failures.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    groups = [(key, who) for key, who in everything if not key[3].endswith(STUB_TEXT)]
    stubs = [(key, who) for key, who in everything if key[3].endswith(STUB_TEXT)]
    rows = []
    for (q, name, title, message), who in groups[:FAILURES_SHOWN]:
        rows.append(f"<tr><td class='num'>{len(who)}</td><td>Q{_e(q)} {_e(title)} <code>[{_e(name)}]</code></td>"
                    f"<td><code>{_e(message)}</code></td><td>{_who(who, links)}</td></tr>")
    shown = f"the {min(len(groups), FAILURES_SHOWN)} commonest of {len(groups)}" if groups else "none"
    parts = ["<h2 id='failures'>Commonest failures</h2><p class='note'>Grouped by the grader's own words: the "
             "first line of the message, numbers shown as &lt;n&gt; and quoted values as &lt;text&gt;, and nothing "
             "a student's code chose (what it raised or printed, its type names), so no hidden input or reference "
             f"value appears here; each student's feedback file has the whole message. Showing {shown}.</p>",
             "<table><tr><th>students</th><th>check</th><th>message</th><th>who</th></tr>" + "".join(rows) + "</table>"]
    if stubs:
        by_function: dict[str, tuple[int, set[str]]] = {}
        for (_q, _name, _title, message), who in stubs:
            function = re.match(r"[^(\s]*", message)[0] or message  # "tokenize(<text>) is not..." -> tokenize
            checks, students = by_function.get(function, (0, set()))
            by_function[function] = (checks + 1, students | set(who))
        rows = [f"<tr><td class='num'>{len(students)}</td><td><code>{_e(function)}</code></td>"
                f"<td class='num'>{checks}</td><td>{_who(sorted(students), links)}</td></tr>"
                for function, (checks, students) in sorted(by_function.items(), key=lambda kv: (-len(kv[1][1]), kv[0]))]
        parts.append(f"<h3 id='not-implemented'>Not implemented yet</h3><p class='note'>{sum(len(w) for _, w in stubs)} "
                     "failures (one per student and check) were a function still the starter's stub (it raises "
                     "NotImplementedError): counted here, not above.</p><table><tr><th>students</th><th>function</th><th>checks</th>"
                     "<th>who</th></tr>" + "".join(rows) + "</table>")
    return "".join(parts)


def _who(who: list[str], links: dict[str, str]) -> str:
    names = ", ".join(_link(sid, links) for sid in who[:NAMES_SHOWN])
    return names + (f" and {len(who) - NAMES_SHOWN} more" if len(who) > NAMES_SHOWN else "")


def _leaderboard(data: ClassReport, links: dict[str, str]) -> str:
    if not data.leaderboard:
        return "<h2 id='leaderboard'>Leaderboard</h2><p class='note'>No check published a metric.</p>"
    parts = ["<h2 id='leaderboard'>Leaderboard</h2><p class='note'>Metrics published by checks that passed "
             "(a check that fails, for instance on a model it did not see trained, publishes nothing); "
             "all of them are in leaderboard.csv.</p>"]
    metrics: dict[tuple[str, str], list[dict]] = {}
    for row in data.leaderboard:
        metrics.setdefault((row["metric"], row["order"]), []).append(row)
    for (name, order), rows in metrics.items():
        better = "lower is better" if order == "asc" else "higher is better"
        held = rows[0]["held_out"]
        where = ("measured on held-out data: kept off Gradescope's leaderboard; do not share before the deadline"
                 if held else "also on Gradescope's leaderboard")
        body = "".join(f"<tr><td class='num'>{row['rank']}</td><td>"
                       + ", ".join(_link(sid, links) for sid in data.members.get(row["student"], [row["student"]]))
                       + f"</td><td class='num'>{row['value']:.6g}</td></tr>" for row in rows)
        parts.append(f"<h3>{_e(name)} <small class='note'>({better}; {where})</small></h3><table><tr><th>rank</th>"
                     f"<th>student</th><th>value</th></tr>{body}</table>")
    return "".join(parts)


def _students(data: ClassReport) -> str:
    def shown(status: str) -> str:  # "error: <the exception's text>": shaped like a failure message
        return "error: " + normalise(status[len("error: "):]) if status.startswith("error: ") else status

    rows = "".join(f"<tr><td><a href=\"{_e(href)}\">{_e(sid)}</a></td><td class='num'>{_e(total)}</td>"
                   f"<td>{_e(shown(status))}</td></tr>" for sid, total, status, href in data.students)
    return ("<h2 id='students'>Students</h2><p class='note'>Each name links to the student's feedback file "
            "(hidden checks' messages in full: staff only).</p><table><tr><th>student (feedback)</th><th>total</th>"
            "<th>status</th></tr>" + rows + "</table>")


def feedback_href(file_name: str) -> str:
    """The link from report.html (in OUT) to OUT/feedback/<file_name>, percent-encoded."""
    return "feedback/" + quote(file_name)
