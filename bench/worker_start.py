"""Starting a worker: forked from the fork server against started with exec, measured in the same run.

For each kind of worker (numpy only, as ngram and backprop; torch preloaded, as the other three)
it starts N workers one after another, each loading one small graded cell and answering one call,
then closes them, first with the fork server (after one untimed worker that starts the server)
and then with `forkserver.AVAILABLE` off, so that every worker starts with exec as before.
Reported per worker: wall time, and CPU time of this process plus the worker's whole process tree
(its keeper, the init of its PID namespace and the worker, read just before it is closed: they are
killed, never waited for, so their CPU never reaches this process's own children's count); the
ratio exec / forked is the speed-up. The server's own start (one import of torch,
paid once per grader process) is printed apart.

Run: .venv/bin/python bench/worker_start.py [--workers 20]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.checking.remote import Student  # noqa: E402
from autograder.sandbox import forkserver  # noqa: E402
from autograder.sandbox.clock import tree_cpu  # noqa: E402
from autograder.sandbox.lifecycle import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

CELLS = [{"index": 0, "number": 1, "source": "def add(x, y):\n    return x + y\n"}]


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def one(import_torch: bool) -> float:
    """Start, use and close one worker; the CPU seconds its process tree used."""
    with Sandbox(CELLS, import_torch=import_torch, limits=Limits(call_timeout=30)) as box:
        assert Student(box, timeout=30).add(2, 3) == 5
        return tree_cpu(box.proc.pid)


def timed(n: int, import_torch: bool) -> tuple[float, float]:
    wall, used = time.perf_counter(), cpu()
    workers = sum(one(import_torch) for _ in range(n))
    return (time.perf_counter() - wall) / n, (cpu() - used + workers) / n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=20)
    n = parser.parse_args().workers
    if not forkserver.AVAILABLE:
        sys.exit("no fork server on this platform: every worker starts with exec")
    for import_torch in (False, True):
        kind = "torch preloaded" if import_torch else "numpy only"
        forkserver.AVAILABLE = True
        started = time.perf_counter()
        one(import_torch)
        first = time.perf_counter() - started
        if not forkserver._servers:
            sys.exit("no fork server was started here (it needs Landlock or a worker user): see docs/security.md")
        forked = timed(n, import_torch)
        forkserver.AVAILABLE = False
        execed = timed(n, import_torch)
        print(f"{kind}: first worker (the server starts) {first:.2f} s wall")
        print(f"  forked: {forked[0]:.3f} s wall, {forked[1]:.3f} s CPU per worker")
        print(f"  exec:   {execed[0]:.3f} s wall, {execed[1]:.3f} s CPU per worker")
        print(f"  exec / forked: {execed[0] / forked[0]:.1f}x wall, {execed[1] / forked[1]:.1f}x CPU")
    forkserver.stop_all()


if __name__ == "__main__":
    main()
