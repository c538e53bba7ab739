"""Batch grading throughput and memory: `lmgrade grade DIR --out OUT --jobs N` on copies of one submission.

Grades COPIES identical copies of the staff solution notebook (every check runs and passes, Q6's
training included: the most expensive submission there is) three times, each time with
`--force`, through the real command in a child process:
  * `--jobs 1` and `--jobs 2` on all CPUs, no memory cap;
  * `--jobs 1` pinned to one CPU (`taskset -c 0`) inside a memory cgroup capped at 768 MiB
    (Gradescope's default container), to show that one submission fits: the cap holds the
    command, its grader and the worker together, as the container would. Where no memory cgroup
    can be made (not root, no cgroup v1/v2 memory controller) the cap is reported as not enforced.
Before the timed runs one copy is graded untimed, so that the reference's Q6 thresholds are cached
(in a temporary $LMGRADE_CACHE, never ~/.cache/lmgrade) and every run measures the steady state.

While a run goes, every process under the command is sampled every 0.25 s (/proc/<pid>/status:
VmHWM, the peak resident set of each process; VmRSS summed over all of them at once). Reported:
submissions per minute, the peak RSS of one grader process and of one worker (the sandboxed
process that runs student code), the peak of their sum, and under the cap the cgroup's own peak
(memory.max_usage_in_bytes, which also counts page cache) and how often it hit the cap.

Run: .venv/bin/python bench/batch_throughput.py [--copies 50] [--assignment ngram] [--skip-capped]
Takes about 40 minutes for 50 copies of `ngram` on 2 CPUs.
"""
from __future__ import annotations

import argparse
import csv
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CAP_BYTES = 768 << 20
SAMPLE_SECONDS = 0.25


def role(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "gone"
    if "autograder.grading.grader_process --serve" in cmd:
        return "grader"
    if "autograder.sandbox.worker" in cmd:
        return "worker"
    return "command" if "autograder grade" in cmd else "other"


def status_kib(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS"):
                out[key] = int(value.split()[0])
    except (OSError, ValueError):
        pass
    return out


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry.name))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found


class Sampler(threading.Thread):
    """Peak RSS per process role, and the peak of the total, for the process tree under `pid`."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak = {"command": 0, "grader": 0, "worker": 0}
        self.total_peak = 0
        self.roles: dict[int, str] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            total = 0
            for pid in descendants(self.pid):
                kind = self.roles.get(pid) or self.roles.setdefault(pid, role(pid))
                mem = status_kib(pid)
                total += mem.get("VmRSS", 0)
                if kind in self.peak:
                    self.peak[kind] = max(self.peak[kind], mem.get("VmHWM", 0))
            self.total_peak = max(self.total_peak, total)
            time.sleep(SAMPLE_SECONDS)


def memory_cgroup(cap: int) -> Path | None:
    """A fresh memory cgroup below ours, capped at `cap` bytes, or None where we may not make one."""
    try:
        line = next(l for l in Path("/proc/self/cgroup").read_text().splitlines()
                    if l.split(":")[1] == "memory" or l.startswith("0::"))
    except (OSError, StopIteration):
        return None
    v1 = line.split(":")[1] == "memory"
    base = Path("/sys/fs/cgroup/memory" if v1 else "/sys/fs/cgroup") / line.split(":", 2)[2].lstrip("/")
    group = base / f"lmgrade-bench-{os.getpid()}"
    try:
        group.mkdir()
        (group / ("memory.limit_in_bytes" if v1 else "memory.max")).write_text(str(cap))
        if v1 and (group / "memory.memsw.limit_in_bytes").exists():
            try:
                (group / "memory.memsw.limit_in_bytes").write_text(str(cap))  # no swapping around the cap
            except OSError:
                pass
    except OSError:
        try:
            group.rmdir()
        except OSError:
            pass
        return None
    return group


def cgroup_stats(group: Path) -> dict:
    v1 = (group / "memory.limit_in_bytes").exists()
    read = lambda name: int((group / name).read_text().split()[0]) if (group / name).exists() else None  # noqa: E731
    if v1:
        return {"peak": read("memory.max_usage_in_bytes"), "hits": read("memory.failcnt"), "limit": read("memory.limit_in_bytes")}
    events = dict(l.split() for l in (group / "memory.events").read_text().splitlines())
    return {"peak": read("memory.peak"), "hits": int(events.get("max", 0)), "limit": read("memory.max"),
            "oom_kills": int(events.get("oom_kill", 0))}


def grade(subs: Path, out: Path, assignment: str, jobs: int, env: dict, cpu: str | None = None,
          group: Path | None = None) -> dict:
    cmd = [sys.executable, "-m", "autograder", "grade", str(subs), "--assignment", assignment, "--device", "cpu",
           "--out", str(out), "--jobs", str(jobs), "--force"]
    if cpu is not None:
        cmd = ["taskset", "-c", cpu] + cmd

    def enter_group():
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    import resource
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=enter_group, start_new_session=True)
    sampler = Sampler(proc.pid)
    sampler.start()
    try:
        output = proc.communicate()[0]
    except BaseException:  # interrupted: stop the command and its graders (each kills its worker on SIGTERM)
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        raise
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command, its graders and their workers
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sampler.stop.set()
    sampler.join()
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    full = sum(1 for r in rows if r["status"] == "graded" and r["total"] and float(r["total"]) >= float(r["max"]))
    result = {"wall": wall, "cpu": cpu, "rows": len(rows), "full": full, "code": proc.returncode, "peak": sampler.peak,
              "total_peak": sampler.total_peak, "output": output}
    if group is not None:
        result["cgroup"] = cgroup_stats(group)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", default="ngram")
    parser.add_argument("--copies", type=int, default=50)
    parser.add_argument("--skip-capped", action="store_true", help="leave out the 1-CPU, 768 MiB run")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that `kill` also stops the command it runs

    from autograder.authoring import assignments, build
    assignment = assignments.get(args.assignment)
    with tempfile.TemporaryDirectory(prefix="lmgrade-bench-batch-") as tmp:
        tmp = Path(tmp)
        notebook = build.notebook(assignment, "solution")
        warm, subs = tmp / "warm", tmp / "subs"
        warm.mkdir()
        subs.mkdir()
        (warm / "student_warm.ipynb").write_text(notebook)
        for i in range(args.copies):
            (subs / f"student_{i:03d}.ipynb").write_text(notebook)
        env = dict(os.environ, LMGRADE_CACHE=str(tmp / "cache"))
        print(f"warming the reference cache with one untimed grading of {args.assignment} ...", flush=True)
        first = grade(warm, tmp / "out-warm", args.assignment, 1, env)
        if first["full"] != 1:
            print(first["output"][-3000:])
            print("FAILED: the staff solution did not get full marks")
            return 1
        runs = [("all CPUs, no cap", 1, None, False), ("all CPUs, no cap", 2, None, False)]
        if not args.skip_capped:
            runs.append(("1 CPU, 768 MiB", 1, "0", True))
        results = []
        for label, jobs, cpu, capped in runs:
            group = memory_cgroup(CAP_BYTES) if capped else None
            note = "" if not capped else (" (cap enforced by a memory cgroup)" if group else " (memory cap NOT enforced: no cgroup)")
            print(f"grading {args.copies} copies: --jobs {jobs}, {label}{note} ...", flush=True)
            try:
                r = grade(subs, tmp / f"out-{len(results)}", args.assignment, jobs, env, cpu, group)
            finally:
                if group is not None:
                    time.sleep(0.5)
                    try:
                        group.rmdir()
                    except OSError:
                        pass
            r.update(label=label + ("" if not capped or group else " (cap not enforced)"), jobs=jobs)
            results.append(r)
            print(f"  {r['wall']:.0f} s ({r['cpu']:.0f} s CPU), {r['full']}/{r['rows']} full marks, exit {r['code']}, "
                  f"load average {os.getloadavg()[0]:.2f}", flush=True)

    cpus = os.cpu_count()
    model = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines()
                  if l.startswith("model name")), "?")
    print(f"\n{args.copies} copies of the {args.assignment} staff solution notebook; {cpus} CPUs ({model}); "
          f"load average now {os.getloadavg()[0]:.2f}")
    header = (f"{'run':<22} {'jobs':>4} {'wall s':>7} {'subs/min':>8} {'CPU s/sub':>9} {'full':>6} {'grader peak':>11} "
              f"{'worker peak':>11} {'sum peak':>9} {'cgroup peak':>11} {'cap hits':>8}")
    print(header)
    print("-" * len(header))
    ok = True
    for r in results:
        cg = r.get("cgroup") or {}
        ok &= r["full"] == args.copies and r["code"] == 0
        print(f"{r['label']:<22} {r['jobs']:>4} {r['wall']:7.0f} {60 * r['rows'] / r['wall']:8.2f} "
              f"{r['cpu'] / r['rows']:9.1f} "
              f"{r['full']:>3}/{r['rows']:<2} {r['peak']['grader'] / 1024:8.0f} MiB {r['peak']['worker'] / 1024:8.0f} MiB "
              f"{r['total_peak'] / 1024:6.0f} MiB "
              + (f"{cg['peak'] / 2**20:8.0f} MiB {cg['hits']:>8}" if cg.get("peak") is not None else f"{'-':>11} {'-':>8}"))
    print("CPU s/sub: user+system time of the command, its graders and workers, per submission (steadier than "
          "wall time on a shared machine).")
    print("grader/worker peak: the largest VmHWM (peak RSS) of any one such process; sum peak: the largest "
          "total RSS of the whole process tree at one sample (every 0.25 s); cgroup peak includes page cache.")
    if not ok:
        print("FAILED: not every copy got full marks")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
