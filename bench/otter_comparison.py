"""What grading `attention` costs us, against the same checks in one process and against Otter.

For one submission and for a batch of 10 (copies of the staff solution notebook, each with its own
comment so that each is a different submission), interleaved over several rounds in alternating
order, it runs and measures:

  ours        `lmgrade grade` (one: `--json`, as on Gradescope; batch: `--out --force --jobs 1`);
  ours-nofs   the same with the fork server off (`forkserver.AVAILABLE = False` set by a wrapper
              before the CLI runs: every worker starts with exec), to price the fork server;
  inproc      every check run in ONE fresh Python against the submission's graded cells loaded as
              a module, through `InProcessChannel` (same wire encoding, no worker, no limits);
  otter       `otter run` on the Otter port in `bench/otter_port/` (the batch: 10 `otter run` one
              after another, as `otter run` takes one submission), where otter-grader is
              installed (`--otter PATH`, `$OTTER`, or `otter` on PATH); skipped, saying so, if not;
  ours-LABEL  `lmgrade grade` from another checkout (`--also LABEL=DIR`, run with PYTHONPATH=DIR):
              a local experiment priced beside the rest;
  otter-1thread `otter run` with OMP_NUM_THREADS=1, as our worker runs (`--otter-one-thread`);
  import-torch, import-numpy (one submission only): a bare `python -c "import ..."`, for estimates.

Each command runs as a child of this process, which is a child subreaper, so every process it
starts (the fork server, the workers, Otter's kernel) is reaped here, orphans included:
  * CPU: user + system of every process the run started, not wall: read from a CPU-accounting
    cgroup made for the run (cgroup v1 `cpuacct.usage`, v2 `cpu.stat`), which counts a process
    however it ends; where none can be made, RUSAGE_CHILDREN, which misses a process killed before
    anyone reaped it: our worker, PID 2 of a PID namespace whose init is killed with it (about
    2 CPU s of a single grading went uncounted that way before this bench read the cgroup);
  * memory: every ~25 ms the process tree is read from /proc: the peak of the summed RSS and of
    the summed PSS (RSS shares out pages that forked processes share: the fair sum), and each
    process's own peak (VmHWM), summed per role (grader, fork server, worker; otter, kernel);
  * where a memory cgroup can be made below ours (root), the run's cgroup peak: each page counted
    once, as a container's memory limit counts it (page cache charged to it included).
Wall time is printed too, but on a loaded machine compare CPU and memory. It prints medians over
rounds and the ratios ours / inproc and ours / otter, and checks that every run gave full marks.

Run: .venv/bin/python bench/otter_comparison.py [--rounds 3] [--batch-rounds 2] [--otter PATH]
     [--only one|batch] [--also LABEL=DIR] [--validate] [--verbose]
`--validate` also grades two planted bugs with both graders once (not timed) to show the port
fails the questions ours fails.
"""
from __future__ import annotations

import argparse
import csv
import ctypes
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_PATH = list(sys.path)
sys.path.insert(0, str(ROOT / "bench"))
from batch_throughput import cgroup_stats, memory_cgroup  # noqa: E402

sys.path[:] = _PATH  # it puts this checkout first; PYTHONPATH=DIR must keep choosing the code measured

PORT = ROOT / "bench" / "otter_port"
BATCH = 10
PERIOD = 0.025  # seconds between memory samples
SCAN_EVERY = 4  # samples between full scans of /proc for new processes
PR_SET_CHILD_SUBREAPER = 36
# `lmgrade` with the fork server off: workers start with exec (the switch bench/worker_start.py uses)
NO_FORKSERVER = ("import sys; from autograder.sandbox import forkserver; forkserver.AVAILABLE = False; "
                 "from autograder.cli import main; sys.exit(main(sys.argv[1:]))")
# every check in one process, no worker: argv = notebooks; prints "passed total" per notebook
IN_PROCESS = """
import sys
from autograder.authoring import assignments, build
from autograder.checking.checks import Context, seed_everything
from autograder.checking.remote import InProcessChannel, Student
from autograder.errors import CheckFailed
from autograder.sandbox import extract
assignment = assignments.get("attention")
ref, fixtures, checks = assignment.reference(), assignment.fixtures(), assignment.checks()
for n, path in enumerate(sys.argv[1:]):
    cells = extract.read_submission(path).cells
    module = build.module_from_text(f"submission{n}", "\\n\\n".join(c.source for c in cells))
    student, passed = Student(InProcessChannel(module)), 0
    for fn in checks:
        ctx = Context(student=student, ref=ref, spec=fn.lmgrade_check, fixtures=fixtures)
        seed_everything(ctx.seed)
        try:
            fn(ctx)
            passed += 1
        except CheckFailed:
            pass
    print("RESULT", passed, len(checks))
"""
IMPORTS = {"import-torch": "import torch", "import-numpy": "import numpy"}  # peers: what an import costs
BUGS = {  # planted in the solution's graded cells, for --validate
    "sdpa without 1/sqrt(d_k)": ("scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
                                 "scores = q @ k.transpose(-2, -1)"),
    "causal_mask aligned upper-left": ("return j <= i + (T_k - T_q)", "return j <= i"),
}


# ---- measuring a process tree -------------------------------------------------------------------
def _ppids() -> dict[int, int]:
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_bytes()
            except OSError:
                continue
            found[int(name)] = int(stat[stat.rfind(b")") + 2:].split()[1])
    return found


def _status(pid: int) -> dict | None:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    kib = lambda key: int(fields.get(key, "0 kB").split()[0])  # noqa: E731
    return {"rss": kib("VmRSS"), "hwm": kib("VmHWM"), "uid": int(fields["Uid"].split()[1])}


def _pss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def role(cmdline: str, uid: int, top: bool) -> str:
    """Which part of the grading a process is, from its command line (a forked worker keeps the
    server's command line but has given up uid 0, or the grader's uid)."""
    if "sandbox.worker import main" in cmdline:
        return "worker"
    if "forkserver import serve" in cmdline:
        return "fork server" if uid == os.getuid() else "worker"
    if "ipykernel" in cmdline:
        return "kernel"
    argv = cmdline.split()
    if any(Path(a).name == "otter" for a in argv[:2]):
        return "otter"
    if top:
        return "bash" if argv[:1] == ["bash"] else "grader"
    return "other"


class Tree:
    """Samples every process below this one (this process is a subreaper: orphans stay below)."""

    def __init__(self):
        self.me, self.procs, self.peak_rss, self.peak_pss = os.getpid(), {}, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        known: set[int] = set()
        tick = 0
        while not self.stop.is_set():
            if tick % SCAN_EVERY == 0:
                ppids, below = _ppids(), {self.me}
                changed = True
                while changed:  # descendants of this process
                    grown = {p for p, pp in ppids.items() if pp in below} | below
                    changed, below = grown != below, grown
                known = below - {self.me}
            total_rss = total_pss = 0
            for pid in list(known):
                status = _status(pid)
                if status is None:
                    known.discard(pid)
                    continue
                pss = _pss(pid)
                seen = self.procs.setdefault(pid, {"cmd": _cmdline(pid), "hwm": 0, "pss": 0,
                                                   "top": _parent(pid) == self.me})
                seen["uid"] = status["uid"]
                seen["hwm"] = max(seen["hwm"], status["hwm"])
                seen["pss"] = max(seen["pss"], pss)
                total_rss += status["rss"]
                total_pss += pss
            self.peak_rss, self.peak_pss = max(self.peak_rss, total_rss), max(self.peak_pss, total_pss)
            tick += 1
            self.stop.wait(PERIOD)

    def roles(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for p in self.procs.values():
            r = out.setdefault(role(p["cmd"], p.get("uid", -1), p["top"]), {"n": 0, "hwm": 0, "pss": 0, "cmds": []})
            r["cmds"].append(f"{p['cmd'][:150]} (RSS {p['hwm'] // 1024} MiB)")
            r["n"] += 1
            r["hwm"] += p["hwm"]
            r["pss"] += p["pss"]
        return out


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat[stat.rfind(b")") + 2:].split()[1])
    except OSError:
        return -1


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_cgroup(memory_group: Path | None) -> Path | None:
    """A cgroup that counts the run's CPU: on v2 the run's memory cgroup itself (`cpu.stat` is always
    there), on v1 a new group below ours in the `cpuacct` hierarchy; None where neither can be had."""
    if memory_group is not None and (memory_group / "cpu.stat").exists():
        return memory_group
    try:
        line = next(l for l in Path("/proc/self/cgroup").read_text().splitlines()
                    if "cpuacct" in l.split(":")[1].split(","))
    except (OSError, StopIteration, IndexError):
        return None
    for mount in (Path("/sys/fs/cgroup/cpuacct"), Path("/sys/fs/cgroup/cpu,cpuacct")):
        if (mount / "cpuacct.usage").exists():
            group = mount / line.split(":", 2)[2].lstrip("/") / f"lmgrade-bench-cpu-{os.getpid()}"
            try:
                group.mkdir()
            except OSError:
                return None
            return group
    return None


def cgroup_cpu_seconds(group: Path) -> float:
    if (group / "cpuacct.usage").exists():
        return int((group / "cpuacct.usage").read_text()) / 1e9
    fields = dict(line.split() for line in (group / "cpu.stat").read_text().splitlines())
    return int(fields["usage_usec"]) / 1e6


def _remove_group(group: Path) -> None:
    """One of the run's cgroups and any left below it (the grader removes its workers' own)."""
    for path in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [group]:
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.05)


def measure(command: list[str], cwd: Path, log: Path, env: dict | None = None) -> dict:
    """Run `command`; its wall time, the CPU of every process it started, and memory of its tree
    (and, where a memory cgroup can be made, the cgroup's peak: what a container's limit counts)."""
    tree = Tree()
    sampler = threading.Thread(target=tree.run, daemon=True)
    group = memory_cgroup(1 << 36)  # no real cap: only to read its peak
    counter = cpu_cgroup(group)
    joins = [g for g in dict.fromkeys((group, counter)) if g is not None]

    def enter() -> None:
        for g in joins:
            (g / "cgroup.procs").write_text(str(os.getpid()))

    cpu, start = _children_cpu(), time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                preexec_fn=enter if joins else None)
        sampler.start()
        proc.wait()
    wall = time.perf_counter() - start
    deadline = time.monotonic() + 30  # orphans (the fork server dies with its grader): reap them too
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.05)
    tree.stop.set()
    sampler.join()
    reaped = _children_cpu() - cpu
    counted = cgroup_cpu_seconds(counter) if counter is not None else None
    peak = None
    if group is not None:
        peak = cgroup_stats(group)["peak"]
    for g in joins:
        _remove_group(g)
    return {"wall": wall, "cpu": reaped if counted is None else counted, "cpu_reaped": reaped,
            "cpu_source": "rusage" if counted is None else "cgroup",
            "rss": tree.peak_rss / 1024, "pss": tree.peak_pss / 1024,
            "cgroup": peak / (1 << 20) if peak else float("nan"),
            "roles": tree.roles(), "rc": proc.returncode, "log": log.read_text(errors="replace")}


# ---- the submissions and the Otter port -----------------------------------------------------------
def otter_notebook(notebook: dict) -> dict:
    """Our notebook as an Otter course would ship it: `otter.Notebook` where our check cell is,
    `grader.check("qN")` after each graded cell (a no-op while Otter grades), `check_all` at the end."""
    cells, question, first = [], None, True

    def code(source: str) -> dict:
        return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}

    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        heading = re.match(r"## Q(\d+)\.", source) if cell["cell_type"] == "markdown" else None
        question = heading.group(1) if heading else question
        if cell["cell_type"] == "code" and "check_notebook(" in source:
            cells.append(code('import otter\ngrader = otter.Notebook("attention.ipynb")' if first else
                              "grader.check_all()"))
            first = False
            continue
        cells.append({k: v for k, v in cell.items() if k != "id"})
        if cell["cell_type"] == "code" and source.startswith("# GRADED CELL") and question:
            cells.append(code(f'grader.check("q{question}")'))
    return dict(notebook, cells=cells, nbformat=4, nbformat_minor=4)


def variant(notebook: dict, label: str, edit: tuple[str, str] | None = None) -> dict:
    """The notebook with a comment naming it at the end of the first graded cell (so that each copy
    is a submission of its own), and an optional textual edit of a graded cell."""
    cells, tagged = [], False
    for cell in notebook["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and source.startswith("# GRADED CELL"):
            if not tagged:
                source, tagged = source.rstrip("\n") + f"\n# {label}\n", True
            if edit and edit[0] in source:
                source = source.replace(edit[0], edit[1])
        cells.append(dict(cell, source=source))
    return dict(notebook, cells=cells)


def find_otter(given: str | None) -> str | None:
    for candidate in (given, os.environ.get("OTTER"), shutil.which("otter"), "/tmp/otter-venv/bin/otter"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def build_port(otter: str, work: Path) -> Path:
    """The port's tests and support files, with the staff reference as `attention_reference.py`,
    made into an autograder zip by `otter generate`."""
    from autograder.authoring import assignments
    src = work / "port"
    shutil.copytree(PORT / "tests", src / "tests")
    shutil.copy(PORT / "support" / "port_common.py", src / "port_common.py")
    shutil.copy(assignments.get("attention").reference_path, src / "attention_reference.py")
    subprocess.run([otter, "generate", "-t", "tests", "-o", str(work / "autograder.zip"), "--no-config",
                    "--no-requirements", "--no-environment", "port_common.py", "attention_reference.py"],
                   cwd=src, check=True, capture_output=True)
    return work / "autograder.zip"


# ---- the runs ---------------------------------------------------------------------------------------
def commands(mode: str, size: str, work: Path, otter: str | None) -> list[str]:
    python, ours = sys.executable, work / "ours"
    files = sorted(ours.glob("*.ipynb"))[: 1 if size == "one" else BATCH]
    lmgrade = [python, "-c", NO_FORKSERVER] if mode == "ours-nofs" else [python, "-m", "autograder"]
    if mode in IMPORTS:
        return [python, "-c", IMPORTS[mode]]
    if mode.startswith("ours"):
        if size == "one":
            return [*lmgrade, "grade", str(files[0]), "--assignment", "attention", "--device", "cpu",
                    "--json", str(work / "results.json")]
        return [*lmgrade, "grade", str(ours), "--assignment", "attention", "--device", "cpu",
                "--out", str(work / "batch_out"), "--force", "--jobs", "1"]
    if mode == "inproc":
        return [python, "-c", IN_PROCESS, *map(str, files)]
    names = sorted((work / "otter").glob("*.ipynb"))[: 1 if size == "one" else BATCH]
    loop = "; ".join(f"mkdir -p {work / 'otter_out' / n.stem} && {otter} run -a {work / 'autograder.zip'} -o {work / 'otter_out' / n.stem} --no-logo {n} "
                     f"|| exit 1" for n in names)
    return ["bash", "-c", loop]


def full_marks(mode: str, size: str, work: Path, result: dict) -> bool:
    n = 1 if size == "one" else BATCH
    if result["rc"] != 0:
        return False
    if mode in IMPORTS:
        return True
    if mode == "inproc":
        rows = [line.split() for line in result["log"].splitlines() if line.startswith("RESULT ")]
        return len(rows) == n and all(r[1] == r[2] for r in rows)
    if mode.startswith("otter"):
        outs = sorted((work / "otter_out").glob("*/results.json"))[:n]
        return len(outs) == n and all(_otter_full(p) for p in outs)
    if size == "one":
        report = json.loads((work / "results.json").read_text())
        return all(t["score"] == t["max_score"] for t in report["tests"])
    with open(work / "batch_out" / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    return len(rows) == n and all(_ours_full(r) for r in rows)


def _otter_full(path: Path) -> bool:
    report = json.loads(path.read_text())
    return all(t.get("score") == t.get("max_score") for t in report["tests"] if t.get("max_score"))


def _ours_full(row: dict) -> bool:
    total, maximum = row.get("total") or row.get("score"), row.get("max_score") or row.get("max")
    if total is None or maximum is None:
        return True  # columns unknown: the exit status stands
    return float(total) >= float(maximum)


def clear(mode: str, work: Path) -> None:
    for name in ("results.json", "batch_out", "otter_out"):
        path = work / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the one-submission runs")
    parser.add_argument("--batch-rounds", type=int, default=2, help="rounds of the batch runs")
    parser.add_argument("--otter", help="the otter executable (default: $OTTER, PATH, /tmp/otter-venv)")
    parser.add_argument("--only", choices=("one", "batch"))
    parser.add_argument("--also", action="append", default=[], metavar="LABEL=DIR",
                        help="also run `lmgrade` from another checkout DIR (PYTHONPATH=DIR) as mode ours-LABEL")
    parser.add_argument("--otter-one-thread", action="store_true",
                        help="also otter run with OMP_NUM_THREADS=1 (our worker's setting) as mode otter-1thread")
    parser.add_argument("--skip", action="append", default=[], metavar="MODE", help="leave out a mode (e.g. ours-nofs)")
    parser.add_argument("--verbose", action="store_true", help="list every process of the first round, by role")
    parser.add_argument("--validate", action="store_true", help="also grade two planted bugs with both (untimed)")
    args = parser.parse_args()
    if sys.platform != "linux":
        sys.exit("this bench reads /proc: Linux only")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("could not become a child subreaper: orphans' CPU would be lost")
    sys.path.append(str(ROOT))  # where autograder is not installed; PYTHONPATH=DIR picks another checkout
    from autograder.authoring import assignments, build
    otter = find_otter(args.otter)
    import autograder
    trees = dict(item.split("=", 1) for item in args.also)
    modes = ["ours", *(f"ours-{label}" for label in trees), "ours-nofs", "inproc"] + (["otter"] if otter else [])
    if otter and args.otter_one_thread:
        modes.append("otter-1thread")
    modes = [m for m in modes if m not in args.skip]
    print(f"ours: {Path(autograder.__file__).parent.parent}" + "".join(f"; ours-{k}: {v}" for k, v in trees.items()))
    if not otter:
        print("otter-grader not found (--otter PATH, $OTTER or `otter` on PATH): Otter is skipped.\n"
              "  To include it: python3.11 -m venv /tmp/otter-venv && /tmp/otter-venv/bin/pip install "
              "otter-grader==7.0.0 torch==2.13.0 ipykernel matplotlib")
    sizes = [s for s in ("one", "batch") if args.only in (None, s)]
    with tempfile.TemporaryDirectory(prefix="lmgrade-bench-") as tmp:
        work = Path(tmp)
        solution = json.loads(build.notebook(assignments.get("attention"), "solution"))
        (work / "ours").mkdir()
        (work / "otter").mkdir()
        (work / "logs").mkdir()
        for k in range(BATCH):
            copy = variant(solution, f"submission {k:02d}")
            (work / "ours" / f"s{k:02d}.ipynb").write_text(json.dumps(copy))
            (work / "otter" / f"s{k:02d}.ipynb").write_text(json.dumps(otter_notebook(copy)))
        if otter:
            build_port(otter, work)
            print(f"otter: {otter}")
        if args.validate:
            validate(work, solution, otter)
        results: dict[tuple[str, str], list[dict]] = {}
        for size in sizes:
            rounds = args.rounds if size == "one" else args.batch_rounds
            for r in range(rounds):
                order = modes if r % 2 == 0 else modes[::-1]  # alternating order
                for mode in order + (list(IMPORTS) if size == "one" else []):
                    clear(mode, work)
                    tree = trees.get(mode.removeprefix("ours-"))
                    env = dict(os.environ, PYTHONPATH=tree) if tree and mode.startswith("ours-") else None
                    if mode == "otter-1thread":
                        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
                    result = measure(commands(mode, size, work, otter), work, work / "logs" / f"{mode}-{size}-{r}.log",
                                     env)
                    result["ok"] = full_marks(mode, size, work, result)
                    results.setdefault((mode, size), []).append(result)
                    print(f"  round {r + 1}/{rounds} {size:>5} {mode:<9} wall {result['wall']:6.1f} s  "
                          f"CPU {result['cpu']:6.2f} s (reaped {result['cpu_reaped']:5.2f})  RSS sum {result['rss']:5.0f} MiB  PSS sum "
                          f"{result['pss']:5.0f} MiB  cgroup {result['cgroup']:5.0f} MiB  {'full marks' if result['ok'] else 'NOT FULL MARKS'}",
                          flush=True)
                    if not result["ok"]:
                        print(result["log"][-3000:])
        report(results, modes, sizes, args.verbose)


def validate(work: Path, solution: dict, otter: str | None) -> None:
    """Both graders on planted bugs: which questions lose points."""
    for label, edit in BUGS.items():
        bad = variant(solution, label, edit)
        path = work / "bug.ipynb"
        path.write_text(json.dumps(bad))
        subprocess.run([sys.executable, "-m", "autograder", "grade", str(path), "--assignment", "attention",
                        "--device", "cpu", "--json", str(work / "bug.json")], capture_output=True, cwd=work)
        ours = sorted({re.match(r"Q\d+", t["name"]).group(0).lower() for t in
                       json.loads((work / "bug.json").read_text())["tests"] if t["score"] < t["max_score"]})
        line = f"validate: {label}: ours loses points in {', '.join(ours) or 'nothing'}"
        if otter:
            (work / "bug_otter.ipynb").write_text(json.dumps(otter_notebook(bad)))
            out = work / "bug_otter_out"
            out.mkdir(exist_ok=True)
            subprocess.run([otter, "run", "-a", str(work / "autograder.zip"), "-o", str(out), "--no-logo",
                            str(work / "bug_otter.ipynb")], capture_output=True, cwd=work)
            tests = json.loads((out / "results.json").read_text())["tests"]
            lost = sorted(t["name"] for t in tests if t.get("max_score") and t["score"] < t["max_score"])
            line += f"; the Otter port in {', '.join(lost) or 'nothing'}"
        print(line)


def report(results: dict, modes: list[str], sizes: list[str], verbose: bool = False) -> None:
    med = lambda rs, key: statistics.median(r[key] for r in rs)  # noqa: E731
    sources = {r["cpu_source"] for rs in results.values() for r in rs}
    print(f"\nmedians ({', '.join(f'{len(results[(modes[0], s)])} rounds {s}' for s in sizes)}); CPU = user + "
          f"system of every process (from {' and '.join(sorted(sources))}); memory = peak of the sum over the process tree (RSS; PSS shares out pages "
          "that forked processes share)")
    print(f"{'run':<7} {'mode':<12} {'wall s':>7} {'CPU s':>7} {'RSS sum MiB':>12} {'PSS sum MiB':>12} "
          f"{'cgroup MiB':>11}  full marks")
    for size in sizes:
        for mode in modes + (list(IMPORTS) if size == "one" else []):
            rs = results[(mode, size)]
            print(f"{size:<7} {mode:<12} {med(rs, 'wall'):>7.1f} {med(rs, 'cpu'):>7.2f} {med(rs, 'rss'):>12.0f} "
                  f"{med(rs, 'pss'):>12.0f} {med(rs, 'cgroup'):>11.0f}  {sum(r['ok'] for r in rs)}/{len(rs)}")
    print("\nratios of medians (ours / peer): wall, CPU, RSS sum, PSS sum, cgroup peak")
    for size in sizes:
        for mine in [m for m in modes if m.startswith("ours")]:
            for peer in ("inproc", "otter", "otter-1thread"):
                if peer not in modes:
                    continue
                a, b = results[(mine, size)], results[(peer, size)]
                print(f"{size:<7} {mine:>9} / {peer:<7} " + "  ".join(
                    f"{key} {med(a, key) / med(b, key):.2f}x" for key in ("wall", "cpu", "rss", "pss", "cgroup")))
    print("\nper role (median over rounds of the sum of each process's own peak; n = processes)")
    for size in sizes:
        for mode in modes:
            rs = results[(mode, size)]
            names = sorted({name for r in rs for name in r["roles"]})
            parts = []
            for name in names:
                hwm = statistics.median(r["roles"].get(name, {}).get("hwm", 0) for r in rs) / 1024
                pss = statistics.median(r["roles"].get(name, {}).get("pss", 0) for r in rs) / 1024
                n = max(r["roles"].get(name, {}).get("n", 0) for r in rs)
                parts.append(f"{name} x{n}: RSS {hwm:.0f} / PSS {pss:.0f} MiB")
            print(f"{size:<7} {mode:<10} " + "; ".join(parts))
            if verbose:
                for name in names:
                    for cmd in rs[0]["roles"].get(name, {}).get("cmds", []):
                        print(f"        {name}: {cmd}")


if __name__ == "__main__":
    main()
