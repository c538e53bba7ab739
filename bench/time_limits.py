"""Each check's time limit as a multiple of the reference's CPU time for the slowest call it makes.

The grader's limits count CPU seconds of the student's process per call (`call_timeout` in
meta.toml, or a check's `timeout=`). Here every check of every finished assignment runs against
the reference in this process (`InProcessChannel`: no worker, no limits), and each call into the
"student" is timed in CPU seconds of this process (encoding included, torch threads summed, so an
overestimate of what the call alone costs). The ratio limit / slowest call says how much slower
than the reference a correct submission may be before it loses a check; the smallest ratios are
printed first.

Run: .venv/bin/python bench/time_limits.py [--assignment ID] [--show N]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # as in the worker
    os.environ[_var] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    import torch

    from autograder.authoring import assignments
    from autograder.grading import runner
    from autograder.checking.checks import Context, seed_everything
    from autograder.checking.remote import InProcessChannel, Student

    parser = argparse.ArgumentParser()
    parser.add_argument("--assignment", action="append")
    parser.add_argument("--show", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)  # as a worker on one vCPU
    chosen = [assignments.get(i) for i in args.assignment] if args.assignment else \
        [a for a in assignments.available() if a.finished]
    for assignment in chosen:
        ref = assignment.reference()
        results = runner.reference_results(assignment)
        channel = InProcessChannel(ref)
        slowest: dict[str, float] = {}
        request = channel.request

        def timed(message, arrays, timeout):
            start = time.process_time()
            try:
                return request(message, arrays, timeout)
            finally:
                slowest[current] = max(slowest.get(current, 0.0), time.process_time() - start)

        channel.request = timed
        rows = []
        for fn in assignment.checks():
            spec = fn.lmgrade_check
            current = spec.name
            ctx = Context(student=Student(channel), ref=ref, spec=spec, fixtures=assignment.fixtures(),
                          cache_tag=runner._cache_tag(assignment), reference_results=results)
            seed_everything(ctx.seed)
            fn(ctx)
            limit = spec.timeout or assignment.call_timeout
            rows.append((limit / max(slowest.get(spec.name, 0.0), 1e-3), spec.name, limit, slowest.get(spec.name, 0.0)))
        rows.sort()
        print(f"{assignment.id}: {len(rows)} checks; limit / slowest reference call (CPU s): "
              f"smallest {rows[0][0]:.0f}x, median {rows[len(rows) // 2][0]:.0f}x")
        for ratio, name, limit, cpu in rows[:args.show]:
            print(f"  {name:<40} limit {limit:>5g} s  reference {cpu:7.3f} s  {ratio:7.0f}x")


if __name__ == "__main__":
    main()
