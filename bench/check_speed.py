"""How long a student waits for one question's public checks, per question, beside peers timed in the same run.

For every assignment the staff solution notebook (`build.notebook(assignment, "solution")`, written to
a temporary folder) is graded the way `check_notebook(question=N)` grades it: in a child Python that
has already imported numpy, torch and the grader (a notebook kernel after its first check), each
question alone with `runner.grade(path, assignment, public_only=True, questions={q})`, which starts a
fresh worker for the student's cells every time. Median and best of RUNS per question.

Peers, timed in the same run so that a loaded machine shows in them too:
  * `python -c "import torch"`: what a worker of a torch assignment pays before any student code;
  * `lmgrade check` on the whole file in a subprocess (what the check cell did before).
Questions whose public checks train a model (TRAINING below) are marked; the target is a median
under 1.5 s for the others, on an idle 2-core machine.

Run: .venv/bin/python bench/check_speed.py [--runs N] [--assignment ID ...] [--question Q]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
TARGET = 1.5  # seconds, median per question without training
TRAINING = {"train_lm", "train_ffnn", "train_seq2seq", "build_model"}  # public checks that train a model
# The "kernel": grades each question RUNS times, round-robin, and prints {question: [seconds, ...]}.
KERNEL = """
import json, sys, time
import numpy, torch
from autograder.authoring import assignments
from autograder.grading import runner
assignment = assignments.get(sys.argv[2])
questions, runs = json.loads(sys.argv[3]), int(sys.argv[4])
runner.grade(sys.argv[1], assignment, public_only=True, questions={questions[0]})  # first check: imports
times = {q: [] for q in questions}
for _ in range(runs):
    for q in questions:
        start = time.perf_counter()
        report = runner.grade(sys.argv[1], assignment, public_only=True, questions={q})
        times[q].append(time.perf_counter() - start)
        assert all(r.passed for r in report.results), [(r.name, r.output) for r in report.results if not r.passed]
print(json.dumps(times))
"""


def wall(command: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(command, capture_output=True, check=True, cwd=cwd)
    return time.perf_counter() - start


def main() -> None:
    from autograder.authoring import assignments, build
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--assignment", nargs="*", help="ids (default: every finished assignment)")
    parser.add_argument("--question", help="only this question")
    args = parser.parse_args()
    chosen = [a for a in assignments.available() if a.finished and (not args.assignment or a.id in args.assignment)]
    print(f"{'assignment':<12} {'Q':>2} {'checks':>6} {'median':>8} {'best':>7}  note")
    peers = []
    with tempfile.TemporaryDirectory() as tmp:
        for assignment in chosen:
            notebook = Path(tmp) / f"{assignment.id}.ipynb"
            notebook.write_text(build.notebook(assignment, "solution"))
            specs = [fn.lmgrade_check for fn in assignment.checks(public_only=True)]
            questions = [q for q in assignment.questions if any(s.question == q for s in specs)
                         and (args.question is None or q == args.question)]
            if not questions:
                continue
            proc = subprocess.run([sys.executable, "-c", KERNEL, str(notebook), assignment.id, json.dumps(questions),
                                   str(args.runs)], capture_output=True, text=True, cwd=tmp)
            if proc.returncode != 0:
                raise SystemExit(f"{assignment.id}: {proc.stderr[-2000:]}")
            times = json.loads(proc.stdout.splitlines()[-1])
            for q in questions:
                mine = [s for s in specs if s.question == q]
                trains = any(set(s.uses) & TRAINING for s in mine)
                median = statistics.median(times[q])
                note = "trains" if trains else ("" if median < TARGET else f"over {TARGET:g} s")
                print(f"{assignment.id:<12} {q:>2} {len(mine):>6} {median:>6.2f} s {min(times[q]):>5.2f} s  {note}")
            torch_import = [wall([sys.executable, "-c", "import torch"], tmp) for _ in range(args.runs)]
            whole = [wall([sys.executable, "-m", "autograder", "check", str(notebook)], tmp) for _ in range(args.runs)]
            peers.append((assignment.id, statistics.median(torch_import), statistics.median(whole)))
    print(f"\n{'peers (median)':<14} {'import torch':>12} {'whole file':>11}")
    for name, torch_import, whole in peers:
        print(f"{name:<14} {torch_import:>10.2f} s {whole:>9.2f} s")


if __name__ == "__main__":
    main()
