"""Sharded batch grading: N shards (`lmgrade grade --shard K/N`, parallel local processes) plus
`lmgrade merge`, against one process (`--jobs 1`) on the same copies of the staff solution.

Why measure it on one machine: shards are meant for N machines (a Slurm array), but what the split
itself costs shows here, next to what it buys. Each shard discovers the whole batch, starts its own
grader process and rewrites its manifest after each submission; the merge re-reads every record and
writes the outputs. A hash partition also makes parts of unequal size in a small batch: the largest
part bounds the speed-up, so the split and that bound are printed too.

Runs, each with --force, after one untimed grading has filled a temporary $LMGRADE_CACHE (never
~/.cache/lmgrade), so all of them measure the steady state:
  1. one process, `--jobs 1`: the peer;
  2. N shard processes started together, `--jobs 1` each, into one OUT; then `lmgrade merge OUT`;
  3. one process, `--jobs N`: the same parallelism without a split (what one machine should use).
Reported: wall seconds, CPU seconds of every process (commands, graders, workers), speed-up over
run 1, and speed-up per core (divided by min(N, CPUs)). Exits 1 unless the merged grades.csv equals
run 1's and every copy has full marks.

Run: .venv/bin/python bench/shard_speedup.py [--copies 12] [--shards 2] [--question N ...]
Takes about 8 minutes for 12 full copies of `ngram` on 2 CPUs; `--question 1` about 1 minute.
"""
from __future__ import annotations

import argparse
import csv
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def start(args: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "autograder", *args], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    done = []
    try:
        for proc in procs:
            done.append((proc.wait(), proc.stdout.read()))
    except BaseException:  # interrupted: stop every command (each stops its graders and workers)
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        raise
    return done


def timed(runs: list[list[str]], env: dict) -> tuple[float, float, list[tuple[int, str]]]:
    """Wall and CPU seconds of commands started together, and each one's (exit status, output)."""
    cpu, wall = children_cpu(), time.perf_counter()
    done = finish([start(args, env) for args in runs])
    return time.perf_counter() - wall, children_cpu() - cpu, done


def rows(out: Path) -> list[dict]:
    with open(out / "grades.csv", newline="") as f:
        return list(csv.DictReader(f))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="ngram")
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--shards", type=int, default=min(os.cpu_count() or 2, 4))
    parser.add_argument("--question", action="append", default=[], help="grade only this question (repeatable)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    from autograder.authoring import assignments, build
    from autograder.grading import shard
    assignment = assignments.get(args.assignment)
    n = args.shards
    cores = min(n, os.cpu_count() or 1)
    with tempfile.TemporaryDirectory(prefix="lmgrade-bench-shards-") as tmp:
        tmp = Path(tmp)
        notebook = build.notebook(assignment, "solution")
        warm, subs = tmp / "warm", tmp / "subs"
        warm.mkdir()
        subs.mkdir()
        (warm / "student_warm.ipynb").write_text(notebook)
        names = [f"student_{i:03d}" for i in range(args.copies)]
        for name in names:
            (subs / f"{name}.ipynb").write_text(notebook)
        sizes = [0] * n
        for name in names:
            sizes[shard.shard_of(name, n)] += 1
        env = dict(os.environ, LMGRADE_CACHE=str(tmp / "cache"))
        common = ["--assignment", args.assignment, "--device", "cpu", "--force"]
        for q in args.question:
            common += ["--question", q]

        print(f"warming the reference cache with one untimed grading of {args.assignment} ...", flush=True)
        _, _, [(code, output)] = timed([["grade", str(warm), "--out", str(tmp / "out-warm"), *common]], env)
        if code != 0:
            print(output[-3000:])
            return 1

        print(f"1. one process, --jobs 1: {args.copies} copies ...", flush=True)
        one = timed([["grade", str(subs), "--out", str(tmp / "one"), "--jobs", "1", *common]], env)
        print(f"2. {n} shards at once, --jobs 1 each (parts of {', '.join(map(str, sizes))}) ...", flush=True)
        shards = timed([["grade", str(subs), "--out", str(tmp / "sharded"), "--jobs", "1", "--shard", f"{k}/{n}",
                         *common] for k in range(n)], env)
        merged = timed([["merge", str(tmp / "sharded")]], env)
        print(f"3. one process, --jobs {n} ...", flush=True)
        jobs = timed([["grade", str(subs), "--out", str(tmp / "jobs"), "--jobs", str(n), *common]], env)
        load = os.getloadavg()[0]

        failed = [output[-2000:] for _, _, done in (one, shards, merged, jobs) for code, output in done if code != 0]
        same = (tmp / "sharded" / "grades.csv").exists() and \
            (tmp / "sharded" / "grades.csv").read_text() == (tmp / "one" / "grades.csv").read_text()
        full = all(r["status"] == "graded" and float(r["total"]) >= float(r["max"]) for r in rows(tmp / "one")) \
            if not args.question else True

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "?")
    what = f"questions {', '.join(args.question)}" if args.question else "every check"
    print(f"\n{args.copies} copies of the {args.assignment} staff solution notebook ({what}); {n} shards; "
          f"{os.cpu_count()} CPUs ({model}); load average at the end {load:.2f}")
    base = one[0]
    table = [("1 process, --jobs 1", one[0], one[1]),
             (f"{n} shards + merge", shards[0] + merged[0], shards[1] + merged[1]),
             ("  of which merge", merged[0], merged[1]),
             (f"1 process, --jobs {n}", jobs[0], jobs[1])]
    print(f"{'run':<22} {'wall s':>7} {'CPU s':>7} {'CPU s/copy':>10} {'speed-up':>8} {'per core':>8}")
    for label, wall, cpu in table:
        if label.startswith("  "):
            print(f"{label:<22} {wall:7.1f} {cpu:7.1f}")
            continue
        used = 1 if "--jobs 1" in label else cores
        print(f"{label:<22} {wall:7.1f} {cpu:7.1f} {cpu / args.copies:10.2f} {base / wall:7.2f}x {base / wall / used:7.2f}x")
    print(f"the split: parts of {sizes}; the largest part bounds the speed-up at {args.copies / max(sizes):.2f}x")
    print(f"merged grades.csv {'identical to' if same else 'DIFFERENT FROM'} the single run's; "
          f"{'every copy full marks' if full else 'NOT every copy full marks'}")
    for text in failed:
        print(text)
    return 0 if same and full and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
