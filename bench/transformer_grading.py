"""Grading one `transformer` submission (the staff solution): wall time and CPU seconds.

The first run in a fresh cache also trains the reference three times for the thresholds (before
the worker starts); later runs read them. Prints both, with the grader's and the worker's CPU.
For Gradescope's 1 vCPU: `taskset -c 0 .venv/bin/python bench/transformer_grading.py`.

Run: .venv/bin/python bench/transformer_grading.py
"""
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.authoring import assignments, build  # noqa: E402
from autograder.grading import runner


def cpu() -> tuple[float, float]:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


def main():
    assignment = assignments.get("transformer")
    with tempfile.TemporaryDirectory() as folder:
        build.write_solution_notebooks(Path(folder), [assignment])
        notebook = Path(folder) / "transformer.ipynb"
        for label in ("first run (reference thresholds read or computed)", "second run (warm)"):
            (g0, w0), start = cpu(), time.monotonic()
            report = runner.grade(notebook, assignment, device="cpu")
            (g1, w1), wall = cpu(), time.monotonic() - start
            print(f"{label}: {report.score:g}/{report.max_score:g} in {wall:.1f} s wall; CPU {g1 - g0:.1f} s grader, "
                  f"{w1 - w0:.1f} s worker; {len(report.results)} checks", flush=True)


if __name__ == "__main__":
    main()
