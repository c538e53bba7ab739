"""Wall time and peak memory of grading one `ngram` submission with the real grader, end to end.

The submission is the staff solution notebook, written into a temporary folder with
`autograder.authoring.build.notebook(assignment, "solution")` (what `lmgrade build --solutions DIR` writes;
calling `lmgrade build` itself would also rewrite the committed generated files if stale).

Each grading runs in a fresh child Python (this file with --child) that calls
`runner.grade(notebook, assignments.get("ngram"), device="cpu")` and then reads
  * the trusted process's peak RSS: getrusage(RUSAGE_SELF).ru_maxrss, and
  * the worker's peak RSS: getrusage(RUSAGE_CHILDREN).ru_maxrss, the largest of the waited-for
    child processes, i.e. the sandboxed worker(s) that ran the student's code.
It grades twice with the same, initially empty, temporary $LMGRADE_CACHE: the cold run builds
the Shakespeare splits and the Q6 reference thresholds (two reference `build_model` trainings,
each scored on its held-out set) and caches them; the warm run reads them back. Your own
~/.cache/lmgrade is never touched.

Then, in this process, it times the reference `solutions/ngram.py` `build_model` on the same
data as the two Q6 checks (Shakespeare train/validation with the grader's min_count-2
vocabulary; the synthetic language's 20,000/2,000 sentences), and prints grading time divided by
that time (best of 3), in wall and in CPU time: "grading costs X times the reference's own work".

Run: .venv/bin/python bench/grading_cost.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MARKER = "GRADING_COST_RESULT "
REF_REPEATS = 3  # the reference timing is the fastest of this many runs (the machine may be shared)


def child(notebook: str) -> None:
    """Grade one notebook in this (fresh) process and print the measurements as one JSON line."""
    import resource

    from autograder.authoring import assignments
    from autograder.grading import runner

    start = time.perf_counter()
    report = runner.grade(notebook, assignments.get("ngram"), device="cpu")
    wall = time.perf_counter() - start
    self_usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    failed = [f"{r.name}: {r.output[:200]}" for r in report.results if not r.passed]
    print(MARKER + json.dumps({
        "score": report.score, "max_score": report.max_score, "execution_time": report.execution_time,
        "grade_wall": wall, "checks": len(report.results), "failed": failed,
        "trusted_peak_kib": self_usage.ru_maxrss, "worker_peak_kib": children.ru_maxrss,
        "trusted_cpu": self_usage.ru_utime + self_usage.ru_stime,
        "worker_cpu": children.ru_utime + children.ru_stime,
    }), flush=True)


def grade_once(notebook: Path, cache: Path) -> dict:
    env = dict(os.environ, LMGRADE_CACHE=str(cache))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, __file__, "--child", str(notebook)], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    process_wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARKER)]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"grading child failed (exit {proc.returncode})")
    result = json.loads(lines[-1][len(MARKER):])
    result["process_wall"] = process_wall
    return result


def load_reference():
    from autograder.authoring import assignments
    return assignments.get("ngram").reference()


def reference_work() -> dict:
    """Time the reference build_model on the data of the two Q6 checks (data preparation not timed)."""
    from autograder.data import shakespeare
    from autograder.data.synthetic import HiddenMarkovLanguage

    ref = load_reference()
    times = {}
    tokenized = {s: [ref.tokenize(line) for line in shakespeare.lines(s)] for s in ("train", "validation")}
    vocab = ref.build_vocab(tokenized["train"], 2)
    train, validation = ([ref.replace_oov(s, vocab) for s in tokenized[split]] for split in ("train", "validation"))
    times["shakespeare"] = timed(ref.build_model, train, validation)

    language = HiddenMarkovLanguage.random(seed=1234)
    train, validation = language.sample(20_000, seed=1), language.sample(2_000, seed=2)
    times["synthetic"] = timed(ref.build_model, train, validation)
    times["total"] = tuple(a + b for a, b in zip(times["shakespeare"], times["synthetic"]))
    return times


def timed(fn, *args) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of a call: the least of REF_REPEATS runs each."""
    walls, cpus = [], []
    for _ in range(REF_REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        fn(*args)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def main() -> int:
    from autograder.authoring import assignments, build

    assignment = assignments.get("ngram")
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="lmgrade-bench-") as tmp:
        tmp = Path(tmp)
        notebook = tmp / "solutions" / assignment.starter_path.name
        notebook.parent.mkdir()
        notebook.write_text(build.notebook(assignment, "solution"))
        cache = tmp / "cache"
        cache.mkdir()
        os.environ["LMGRADE_CACHE"] = str(cache)  # the reference timing below reads the same splits

        runs = {}
        for label in ("cold", "warm"):
            print(f"grading the staff solution notebook ({label} cache) ...", flush=True)
            runs[label] = grade_once(notebook, cache)
        print("timing the reference build_model on the two Q6 data sets in-process ...", flush=True)
        ref = reference_work()

    ref_wall, ref_cpu = ref["total"]
    print(f"\nload average (1 min) before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    header = (f"{'run':<5} {'score':>9} {'grade s':>8} {'process s':>9} {'trusted peak':>12} "
              f"{'worker peak':>11} {'trusted cpu s':>13} {'worker cpu s':>12} {'x ref wall':>10} {'x ref cpu':>9}")
    print(header)
    print("-" * len(header))
    ok = True
    for label, r in runs.items():
        ok &= r["score"] >= r["max_score"] and not r["failed"]
        print(f"{label:<5} {r['score']:>4g}/{r['max_score']:<4g} {r['execution_time']:8.1f} "
              f"{r['process_wall']:9.1f} {mib(r['trusted_peak_kib']):>12} {mib(r['worker_peak_kib']):>11} "
              f"{r['trusted_cpu']:13.1f} {r['worker_cpu']:12.1f} {r['execution_time'] / ref_wall:9.1f}x "
              f"{(r['trusted_cpu'] + r['worker_cpu']) / ref_cpu:8.1f}x")
    r = runs["warm"]
    print(f"\nscore: points over max_score ({r['checks']} checks; max_score leaves out the extra-credit Q7 "
          "points, so full marks can exceed it).\n"
          "grade s: Report.execution_time (runner.grade, end to end); process s: the child Python including "
          "interpreter start and imports;\npeaks are max RSS; worker cpu is the sandboxed worker's user+system time; "
          "x ref wall = grade s / reference wall;\nx ref cpu = (trusted + worker CPU) / reference CPU (steadier "
          "than wall time when the machine is shared).")
    print(f"reference build_model in-process (best of {REF_REPEATS}): Shakespeare {ref['shakespeare'][0]:.1f} s + synthetic "
          f"{ref['synthetic'][0]:.1f} s = {ref_wall:.1f} s wall ({ref_cpu:.1f} s CPU)")
    for label, r in runs.items():
        print(f"{label}: grading costs {r['execution_time'] / ref_wall:.1f} times the reference's own work in wall "
              f"time ({r['execution_time']:.1f} s vs {ref_wall:.1f} s), "
              f"{(r['trusted_cpu'] + r['worker_cpu']) / ref_cpu:.1f} times in CPU time "
              f"({r['trusted_cpu'] + r['worker_cpu']:.1f} s vs {ref_cpu:.1f} s)")
    for label, r in runs.items():
        for failure in r["failed"]:
            print(f"{label}: FAILED CHECK {failure}")
    if not ok:
        print("FAILED: the staff solution did not pass every check")
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        sys.exit(main())
