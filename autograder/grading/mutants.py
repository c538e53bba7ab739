"""`lmgrade mutants`: how many wrong versions of the reference an assignment's checks catch.

Why: a course that edits or writes an assignment cannot otherwise know whether its checks catch
wrong code, beyond the bugs someone thought of. A mutant is the staff solution notebook with one
small change in one graded function (mutation_operators.py: cosmic-ray's classic operators and our
tensor ones). Each is graded on the questions whose checks grade that function, through the batch
machinery (`batch.run`: parallel grader processes, confined workers, records that make a rerun
resume). A mutant the checks fail is caught; one they pass survived, unless it is equivalent:
graded again here with the same held-out draws as the unchanged solution, every value the checks
read back from it is the same, so no check could ever tell it apart. Staff may accept a survivor
in meta.toml (`[mutants.accepted]`, id = reason); accepted and equivalent mutants leave the score.

Files in OUT: mutants.csv and mutants.html (every survivor as a diff), the mutant notebooks under
submissions/q<Q>/, and each question's batch under runs/q<Q>/.
"""
from __future__ import annotations

import ast
import csv
import difflib
import hashlib
import html
import io
import json
import random
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cosmic_ray.ast import Visitor, get_ast

from autograder.authoring import build
from autograder.authoring.assignments import Assignment
from autograder.grading import batch
from autograder.grading.mutation_operators import TENSOR_OPERATORS, all_operators
from autograder.grading.records import check_specs, checks_digest, file_digest, load_records
from autograder.grading.results import _qkey, write_text
from autograder.sandbox.extract import GRADED_TAG

BASELINE = "baseline"  # the file name of the unchanged solution in each question's folder
HOUR = 3600.0


@dataclass(frozen=True)
class Mutant:
    id: str  # stable across runs: a digest of the function, the operator and the changed cell
    function: str  # the graded name it changes
    questions: tuple[str, ...]  # the questions whose checks grade that name
    operator: str
    line: int  # in the cell, 1-based
    cell: int  # index of the notebook cell it changes
    source: str  # that cell's changed source
    diff: str


@dataclass
class Outcome:
    mutant: Mutant
    status: str = "pending"  # caught | survived | equivalent | accepted | error
    detail: str = ""  # the first failing check, or why it is not counted


@dataclass
class Summary:
    assignment: str
    outcomes: list[Outcome] = field(default_factory=list)
    baseline_problems: dict[str, str] = field(default_factory=dict)  # question -> why its mutants were not judged
    questions: list[str] = field(default_factory=list)  # the questions graded in this run
    seconds: float = 0.0

    def per_question(self) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for o in self.outcomes:
            for q in o.mutant.questions:
                if q not in self.questions:
                    continue
                row = table.setdefault(q, dict.fromkeys(("mutants", "caught", "survived", "equivalent", "accepted",
                                                         "error"), 0))
                row["mutants"] += 1
                row[o.status] = row.get(o.status, 0) + 1
        return dict(sorted(table.items(), key=lambda kv: _qkey(kv[0])))

    @staticmethod
    def score(row: dict[str, int]) -> float | None:
        """Caught over the mutants that count (equivalent and accepted ones do not)."""
        counted = row["caught"] + row["survived"] + row["error"]
        return None if counted == 0 else row["caught"] / counted


def graded_names(assignment: Assignment) -> dict[str, tuple[str, ...]]:
    """Student name -> the questions whose checks grade it (their `uses`)."""
    names: dict[str, set[str]] = {}
    for spec in check_specs(assignment):
        for name in spec.uses:
            names.setdefault(name, set()).add(spec.question)
    return {n: tuple(sorted(qs, key=_qkey)) for n, qs in names.items()}


class _Apply(Visitor):
    """Counts an operator's positions over a tree and applies the one numbered `occurrence`."""

    def __init__(self, operator, occurrence: int = -1):
        self.operator, self.occurrence = operator, occurrence
        self.count, self.lines = 0, []

    def visit(self, node):
        for index, (start, _) in enumerate(list(self.operator.mutation_positions(node))):
            if self.count == self.occurrence:
                node = self.operator.mutate(node, index)
            self.lines.append(start[0])
            self.count += 1
        return node


def _mutate(source: str, operator_cls, occurrence: int) -> str:
    tree = _Apply(operator_cls(), occurrence).walk(get_ast(source))
    return tree.get_code()


def enumerate_mutants(assignment: Assignment, *, question: str | None = None, per_function: int = 6,
                      seed: int = 0) -> list[Mutant]:
    """The sampled mutants of every graded function (of `question`'s only, if given): at most
    `per_function` each, spread over the operators (tensor ones first), deterministic for a seed."""
    graded = graded_names(assignment)
    notebook = json.loads(build.notebook(assignment, "solution"))
    operators = all_operators()
    chosen: list[Mutant] = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or GRADED_TAG not in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell["source"])
        try:
            spans = [(node.name, node.lineno, node.end_lineno) for node in ast.parse(source).body
                     if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in graded]
        except SyntaxError:
            continue
        for name, first, last in spans:
            if question is not None and question not in graded[name]:
                continue
            by_operator: dict[str, list[tuple[int, int]]] = {}
            for op_name, op_cls in operators.items():
                counter = _Apply(op_cls())
                counter.walk(get_ast(source))
                by_operator[op_name] = [(i, line) for i, line in enumerate(counter.lines) if first <= line <= last]
            chosen += _sample(assignment, name, graded[name], index, source, by_operator, per_function, seed)
    return chosen


def _sample(assignment, name, questions, cell, source, by_operator, limit, seed) -> list[Mutant]:
    """Round-robin over operators (tensor first, then cosmic-ray's, each list shuffled by `seed`),
    keeping mutants that compile and differ from every one kept."""
    rng = random.Random(f"{assignment.id}:{name}:{seed}")
    queues = []
    for op_name in sorted(by_operator, key=lambda n: (n not in TENSOR_OPERATORS, n)):
        spots = list(by_operator[op_name])
        rng.shuffle(spots)
        if spots:
            queues.append((op_name, spots))
    family_order = [q for q in queues if q[0] in TENSOR_OPERATORS]
    classic = [q for q in queues if q[0] not in TENSOR_OPERATORS]
    rng.shuffle(classic)
    queues = family_order + classic
    kept: list[Mutant] = []
    seen = {source}
    operators = all_operators()
    while queues and len(kept) < limit:
        for op_name, spots in list(queues):
            if len(kept) >= limit:
                break
            if not spots:
                queues.remove((op_name, spots))
                continue
            occurrence, line = spots.pop()
            try:
                changed = _mutate(source, operators[op_name], occurrence)
                compile(changed, "<mutant>", "exec")
            except Exception:  # an operator that cannot apply here, or code that does not parse
                continue
            if changed in seen:
                continue
            seen.add(changed)
            diff = "".join(difflib.unified_diff(source.splitlines(True), changed.splitlines(True),
                                                f"{name} (reference)", f"{name} (mutant)", n=1))
            digest = hashlib.sha256(f"{name}\0{op_name}\0{changed}".encode()).hexdigest()[:10]
            kept.append(Mutant(id=f"{name}-{digest}", function=name, questions=questions, operator=op_name,
                               line=line, cell=cell, source=changed, diff=diff))
    return kept


def accepted(assignment: Assignment) -> dict[str, str]:
    """Survivors staff accepted, from meta.toml's `[mutants.accepted]`: id -> reason."""
    meta = tomllib.loads((assignment.dir / "meta.toml").read_text())
    table = meta.get("mutants", {}).get("accepted", {})
    return {str(k): str(v) for k, v in table.items()}


def _write_notebook(notebook: dict, mutant: Mutant | None, path: Path) -> None:
    doc = json.loads(json.dumps(notebook))
    if mutant is not None:
        doc["cells"][mutant.cell]["source"] = mutant.source
    write_text(path, json.dumps(doc, indent=1))


def run(assignment: Assignment, out: Path, *, question: str | None = None, per_function: int = 6, jobs: int = 1,
        seed: int = 0, progress: bool | None = None, say=print) -> Summary:
    """Make, grade and judge the mutants; write OUT/mutants.csv and OUT/mutants.html. A run that
    was interrupted, or split with `question`, resumes from the batch records under OUT/runs."""
    started = time.monotonic()
    mutants = enumerate_mutants(assignment, question=question, per_function=per_function, seed=seed)
    notebook = json.loads(build.notebook(assignment, "solution"))
    summary = Summary(assignment=assignment.id, outcomes=[Outcome(m) for m in mutants])
    questions = sorted({q for m in mutants for q in m.questions if question is None or q == question}, key=_qkey)
    summary.questions = questions
    digest = checks_digest(assignment)
    seconds: dict[str, float] = {}
    for q in questions:  # the unchanged solution first: it must pass, and it times the question
        record = _grade(assignment, out, q, notebook, [None], digest, jobs, progress).get(BASELINE)
        seconds[q] = (record or {}).get("report", {}).get("execution_time", 0.0) if record else 0.0
        failing = _failures(record, q)
        if failing:
            summary.baseline_problems[q] = f"the unchanged solution fails {failing}: its mutants were not judged"
    todo = {q: [m for m in mutants if q in m.questions] for q in questions if q not in summary.baseline_problems}
    hours = sum(seconds[q] * len(ms) for q, ms in todo.items()) / max(jobs, 1) / HOUR
    say(f"{len(mutants)} mutants of {assignment.id}, about {hours * 60:.0f} min of grading on {jobs} job(s)")
    if hours > 1:
        slow = sorted(todo, key=lambda q: -seconds[q] * len(todo[q]))
        say("over an hour: split it by question, each part on its own machine or at another time, into the same "
            "--out folder (a rerun resumes, and the last one writes the report): "
            + "; ".join(f"lmgrade mutants {assignment.id} --question {q}" for q in slow))
    failed: dict[str, dict[str, str]] = {}  # mutant id -> question -> first failing check
    for q, ms in todo.items():
        records = _grade(assignment, out, q, notebook, ms, digest, jobs, progress)
        for m in ms:
            failed.setdefault(m.id, {})[q] = _failures(records.get(m.id), q)
    keep = accepted(assignment)
    baselines: dict[str, list] = {}
    for o in summary.outcomes:
        qs = [q for q in o.mutant.questions if q in todo]
        if not qs:
            o.status, o.detail = "error", "not judged: " + ("; ".join(summary.baseline_problems.values())
                                                            or "its questions were not asked for")
            continue
        fails = {q: failed[o.mutant.id][q] for q in qs if failed[o.mutant.id].get(q)}
        if fails:
            o.status = "error" if any(v.startswith("(not graded") for v in fails.values()) else "caught"
            o.detail = "; ".join(f"Q{q}: {v}" for q, v in fails.items())
        elif _equivalent(assignment, notebook, o.mutant, qs, out, baselines):
            o.status, o.detail = "equivalent", "every value the checks read back is the reference's"
        elif o.mutant.id in keep:
            o.status, o.detail = "accepted", keep[o.mutant.id]
        else:
            o.status, o.detail = "survived", "every check passed"
    summary.seconds = time.monotonic() - started
    write_text(out / "mutants.csv", _csv(summary))
    write_text(out / "mutants.html", _html(summary))
    return summary


def _grade(assignment, out: Path, question: str, notebook: dict, mutants: list, digest: str, jobs: int,
           progress) -> dict[str, dict]:
    """Grade on `question` those of `mutants` (None: the unchanged solution) that have no current
    record yet, through the batch machinery; every record of that question's run, by file name."""
    state = out / "runs" / f"q{question}"
    folder = out / "submissions" / f"q{question}"
    folder.mkdir(parents=True, exist_ok=True)
    done = {Path(r.get("file") or "").stem: r for r in load_records(state / ".lmgrade" / "records").values()}
    for stale in folder.glob("*.ipynb"):
        stale.unlink()
    pending = 0
    for m in mutants:
        name = BASELINE if m is None else m.id
        path = folder / f"{name}.ipynb"
        _write_notebook(notebook, m, path)
        record = done.get(name)
        if record is not None and record.get("checks") == digest and record.get("sha256") == file_digest(path) \
                and question in record.get("questions", []) and record.get("status") == "graded":
            path.unlink()  # graded in an earlier run: its record stands
        else:
            pending += 1
    if pending:
        batch.run([folder], assignment, state, jobs=jobs, questions=[question], progress=progress)
    return {Path(r.get("file") or "").stem: r for r in load_records(state / ".lmgrade" / "records").values()}


def _failures(record: dict | None, question: str) -> str:
    """The first failing check of `question` in a batch record ('' when all passed)."""
    if record is None:
        return "(not graded: no record)"
    if record.get("status") != "graded" or not record.get("report"):
        return f"(not graded: {record.get('error') or record.get('message') or record.get('status')})"
    failed = [r["name"] for r in record["report"]["results"] if r["question"] == question and not r["passed"]]
    return failed[0] if failed else ""


def _equivalent(assignment, notebook, mutant: Mutant, questions: list[str], out: Path, baselines: dict) -> bool:
    """Graded again with the unchanged solution's held-out draws, does every value the checks read
    back from the mutant equal the solution's? Then no check could ever catch it."""
    from autograder.grading import runner
    folder = out / "equivalence"
    folder.mkdir(parents=True, exist_ok=True)
    for q in questions:
        if q not in baselines:
            path = folder / f"{BASELINE}.ipynb"
            _write_notebook(notebook, None, path)
            baselines[q] = _transcript(runner, path, assignment, q)
        path = folder / f"{mutant.id}.ipynb"
        _write_notebook(notebook, mutant, path)
        if _transcript(runner, path, assignment, q) != baselines[q]:
            return False
    return True


def _transcript(runner, path: Path, assignment: Assignment, question: str) -> list:
    transcript: list = []
    runner.grade(path, assignment, questions={question}, submission_seed=0, transcript=transcript)
    return transcript


def _csv(summary: Summary) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["id", "function", "questions", "operator", "line", "status", "detail"])
    for o in summary.outcomes:
        m = o.mutant
        writer.writerow([m.id, m.function, " ".join(m.questions), m.operator, m.line, o.status, o.detail])
    return buffer.getvalue()


def table(summary: Summary) -> str:
    """The per-question table printed at the end and shown in the report."""
    lines = [f"{'question':<9}{'mutants':>8}{'caught':>8}{'survived':>9}{'equiv.':>8}{'accepted':>9}{'error':>7}"
             f"{'score':>8}"]
    for q, row in summary.per_question().items():
        score = Summary.score(row)
        lines.append(f"Q{q:<8}{row['mutants']:>8}{row['caught']:>8}{row['survived']:>9}{row['equivalent']:>8}"
                     f"{row['accepted']:>9}{row['error']:>7}{'-' if score is None else f'{score:.0%}':>8}")
    total = dict.fromkeys(("mutants", "caught", "survived", "equivalent", "accepted", "error"), 0)
    for o in summary.outcomes:  # each mutant once, however many questions grade its function
        total["mutants"] += 1
        total[o.status] = total.get(o.status, 0) + 1
    score = Summary.score(total)
    lines.append(f"{'all':<9}{total['mutants']:>8}{total['caught']:>8}{total['survived']:>9}{total['equivalent']:>8}"
                 f"{total['accepted']:>9}{total['error']:>7}{'-' if score is None else f'{score:.0%}':>8}")
    return "\n".join(lines)


def _html(summary: Summary) -> str:
    e = html.escape
    parts = [f"<!doctype html><meta charset='utf-8'><title>Mutants of {e(summary.assignment)}</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}pre{background:#f6f6f6;"
             "padding:.5em;overflow-x:auto}td,th{padding:.2em .6em;text-align:right}</style>",
             f"<h1>Mutants of <code>{e(summary.assignment)}</code></h1>",
             "<p>A mutant is the staff solution with one small change in one graded function. <b>Caught</b>: a "
             "check failed. <b>Survived</b>: every check passed and some value the checks read back differs from "
             "the solution's, so a student with this bug gets full marks. <b>Equivalent</b>: every value the "
             "checks read back is the solution's (no check could ever tell). Accept a survivor that is not a bug "
             "in <code>meta.toml</code>: <code>[mutants.accepted]</code> then <code>\"ID\" = \"why\"</code>.</p>",
             f"<pre>{e(table(summary))}</pre>"]
    for q, why in summary.baseline_problems.items():
        parts.append(f"<p><b>Q{e(q)}</b>: {e(why)}</p>")
    survivors = [o for o in summary.outcomes if o.status == "survived"]
    parts.append(f"<h2>Survivors ({len(survivors)})</h2>")
    for o in survivors:
        m = o.mutant
        parts.append(f"<h3 id='{e(m.id)}'>{e(m.id)}: <code>{e(m.function)}</code> (Q{e(', Q'.join(m.questions))}), "
                     f"{e(m.operator)}</h3><pre>{e(m.diff)}</pre>")
    others = [o for o in summary.outcomes if o.status != "survived"]
    parts.append("<h2>The others</h2><table><tr><th>id</th><th>status</th><th>operator</th><th>detail</th></tr>")
    parts += [f"<tr><td>{e(o.mutant.id)}</td><td>{e(o.status)}</td><td>{e(o.mutant.operator)}</td>"
              f"<td style='text-align:left'>{e(o.detail)}</td></tr>" for o in others]
    parts.append("</table>")
    return "\n".join(parts) + "\n"
