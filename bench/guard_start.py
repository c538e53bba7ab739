"""What the worker's guard (autograder/sandbox/guard.py) adds to a worker's start, measured in one run.

Forked workers with torch preloaded (as transformer, rnn_lm and attention grade), each loading one
small graded cell and answering one call, alternately without the guard and with the transformer's
rules (its audit hook, 98 aten operators switched off at the dispatcher, the Python routines of the
banned families replaced), so that a busy machine slows both alike. Reported per worker: wall time
and CPU time of this process and its waited-for children (as bench/worker_start.py, which compares
forked with exec'd starts), and what the guard's install itself takes in a worker.

Run: .venv/bin/python bench/guard_start.py [--workers 10]
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.authoring import assignments  # noqa: E402
from autograder.checking.remote import Student  # noqa: E402
from autograder.sandbox import forkserver, guard  # noqa: E402
from autograder.sandbox.lifecycle import Sandbox  # noqa: E402
from autograder.sandbox.limits import Limits  # noqa: E402

CELLS = [{"index": 0, "number": 1, "source": "def add(x, y):\n    return x + y\n"}]


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def one(rules) -> tuple[float, float]:
    wall, used = time.perf_counter(), cpu()
    with Sandbox(CELLS, import_torch=True, limits=Limits(call_timeout=30)) as box:
        box.guard = rules
        assert Student(box, timeout=30).add(2, 3) == 5
    return time.perf_counter() - wall, cpu() - used


def install_cost(rules) -> float:
    """The guard's install in this process (a fresh module), as the worker runs it."""
    import types

    import torch  # noqa: F401 - the worker has it
    started = time.perf_counter()
    guard.install(types.ModuleType("submission").__dict__, (), rules)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=10)
    n = parser.parse_args().workers
    rules = guard.rules_for(assignments.get("transformer"))
    one(None)  # the fork server starts
    if not forkserver._servers:
        print("no fork server here (it needs Landlock or a worker user): workers start with exec")
    plain, guarded = [], []
    for _ in range(n):
        plain.append(one(None))
        guarded.append(one(rules))
    for name, runs in (("without the guard", plain), ("with the guard", guarded)):
        print(f"{name}: {sum(w for w, _ in runs) / n:.3f} s wall, {sum(c for _, c in runs) / n:.3f} s CPU per worker")
    forkserver.stop_all()
    print(f"the install alone, in this process: {install_cost(rules) * 1000:.0f} ms")  # last: the hook stays


if __name__ == "__main__":
    main()
