"""Wall time and peak memory of grading one `attention` submission, against the same checks run
without isolation.

  * isolated: `runner.grade(solution notebook, attention, device="cpu")` in a fresh child Python:
    the real grader (worker process, limits, wire). Peak RSS of the trusted process
    (RUSAGE_SELF) and of the worker (RUSAGE_CHILDREN) are read after it.
  * in-process baseline: every check of the assignment run in a fresh child Python against the
    reference module through `InProcessChannel` (same wire encoding, no worker process, no
    limits): roughly what a grader that runs student code in its own process (Otter-style) pays.
The ratio isolated / in-process is the price of isolation. Best of 3 runs each (`--runs N`).
CPU seconds (grader and worker) are reported too: on a busy machine they, not wall time, compare.

Run: .venv/bin/python bench/attention_grading.py [--runs N]
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
MARKER = "ATTENTION_GRADING "
RUNS = 3


def child(mode: str, notebook: str) -> None:
    import resource

    start = time.perf_counter()
    from autograder.authoring import assignments
    from autograder.grading import runner
    assignment = assignments.get("attention")
    if mode == "isolated":
        report = runner.grade(notebook, assignment, device="cpu")
        passed, total = sum(r.passed for r in report.results), len(report.results)
    else:
        from autograder.checking.checks import Context, seed_everything
        from autograder.checking.remote import InProcessChannel, Student
        ref = assignment.reference()
        student = Student(InProcessChannel(ref))
        passed = total = 0
        for fn in assignment.checks():
            ctx = Context(student=student, ref=ref, spec=fn.lmgrade_check, fixtures=assignment.fixtures())
            seed_everything(ctx.seed)
            fn(ctx)
            passed, total = passed + 1, total + 1
    wall = time.perf_counter() - start
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(MARKER + json.dumps({"wall": wall, "self_mb": me.ru_maxrss / 1024, "worker_mb": children.ru_maxrss / 1024,
                               "cpu": me.ru_utime + me.ru_stime, "worker_cpu": children.ru_utime + children.ru_stime,
                               "passed": passed, "total": total}))


def run(mode: str, notebook: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(notebook)], capture_output=True,
                         text=True, check=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith(MARKER))[len(MARKER):])


def main(runs: int = RUNS) -> None:
    from autograder.authoring import assignments, build
    with tempfile.TemporaryDirectory() as tmp:
        notebook = Path(tmp) / "attention.ipynb"
        notebook.write_text(build.notebook(assignments.get("attention"), "solution"))
        results = {mode: min((run(mode, notebook) for _ in range(runs)), key=lambda r: r["wall"])
                   for mode in ("isolated", "in-process")}
    for mode, r in results.items():
        worker = f", worker peak RSS {r['worker_mb']:.0f} MB" if mode == "isolated" else ""
        cpu = f"{r['cpu']:.1f} s CPU" + (f" + worker {r['worker_cpu']:.1f} s CPU" if mode == "isolated" else "")
        print(f"{mode:>10}: {r['wall']:.1f} s wall, {cpu} ({r['passed']}/{r['total']} checks passed), "
              f"grader peak RSS {r['self_mb']:.0f} MB{worker}")
    print(f"isolation costs {results['isolated']['wall'] / results['in-process']['wall']:.2f}x the in-process time")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
    else:
        main(int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else RUNS)
