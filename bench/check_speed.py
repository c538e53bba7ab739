"""How long a student waits for `check_notebook(question=N)`, against checking the whole file.

Both grade the staff solution notebook's public checks, each in a fresh child Python that has
already imported numpy and torch (as a notebook kernel has):
  * one question: `check_notebook(path, question=N)`: the grading side in the kernel, a fresh
    worker for the student's cells, only question N's public checks;
  * whole file: `lmgrade check path` in a subprocess (what the check cell did before): a new
    Python, the grader's imports, every public check.
Best of 3 wall times each; the ratio is one-question / whole-file. The target is about 1.5 s on
a laptop; figures on this shared 2-core machine are slower.

Run: .venv/bin/python bench/check_speed.py [--question N]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RUNS = 3
KERNEL = ("import io, contextlib, sys, time, numpy, torch\n"
          "from autograder import check_notebook\n"
          "start = time.perf_counter()\n"
          "with contextlib.redirect_stdout(io.StringIO()):\n"
          "    check_notebook(sys.argv[1], question=sys.argv[2])\n"
          "print(time.perf_counter() - start)\n")


def best(times) -> float:
    return min(times)


def main() -> None:
    from autograder import assignments, build
    parser = argparse.ArgumentParser()
    parser.add_argument("--question", default="2")
    args = parser.parse_args()
    print(f"{'assignment':<12} {'question ' + args.question:>12} {'whole file':>11} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for assignment in [a for a in assignments.available() if a.finished]:
            notebook = Path(tmp) / f"{assignment.id}.ipynb"
            notebook.write_text(build.notebook(assignment, "solution"))
            one, whole = [], []
            for _ in range(RUNS):
                proc = subprocess.run([sys.executable, "-c", KERNEL, str(notebook), args.question],
                                      capture_output=True, text=True, check=True, cwd=tmp)
                one.append(float(proc.stdout.split()[-1]))
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "autograder", "check", str(notebook)],
                               capture_output=True, check=True, cwd=tmp)
                whole.append(time.perf_counter() - start)
            print(f"{assignment.id:<12} {best(one):>10.2f} s {best(whole):>9.2f} s {best(one) / best(whole):>6.2f}")


if __name__ == "__main__":
    main()
