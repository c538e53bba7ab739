"""Wall time, CPU time and peak memory of grading one `rnn_lm` submission (the staff solution
notebook, every check, warm reference cache), in a fresh child Python as `lmgrade grade` runs it.

Also prints the CPU seconds of the two trainings a submission's worker runs (Q7's Shakespeare LSTM
and Q8's digit-reversal seq2seq) when the reference does them in-process on one thread, the unit
the checks' time limits are stated in. `--cpu0` pins the child to CPU 0 (`taskset -c 0`), the
Gradescope-like single-vCPU figure.

Run: .venv/bin/python bench/rnn_lm_grading.py [--cpu0]
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
MARKER = "RNN_LM_GRADING "


def child(notebook: str) -> None:
    import resource

    from autograder.authoring import assignments
    from autograder.grading import runner
    assignment = assignments.get("rnn_lm")
    runner.reference_results(assignment)  # warm cache: the Q7 threshold is computed once per reference version
    start = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_SELF)
    report = runner.grade(notebook, assignment, device="cpu")
    wall = time.perf_counter() - start
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    slow = sorted(((r.name, r.output) for r in report.results), key=lambda x: x[0])
    print(MARKER + json.dumps({
        "wall": wall, "cpu": me.ru_utime + me.ru_stime - before.ru_utime - before.ru_stime,
        "worker_cpu": children.ru_utime + children.ru_stime, "self_mb": me.ru_maxrss / 1024,
        "worker_mb": children.ru_maxrss / 1024, "score": report.score, "max": report.max_score,
        "failed": [name for name, _ in slow if not next(r for r in report.results if r.name == name).passed]}))


def reference_trainings() -> dict:
    """CPU seconds of the reference's own Q7 and Q8 trainings, one thread, in this process."""
    
    import numpy as np
    import torch
    torch.set_num_threads(1)
    from autograder.authoring import assignments
    hidden = assignments.load_module(ROOT / "assignments/rnn_lm/hidden_checks.py", "lmgrade_checks_rnn_lm_hidden")
    ref = assignments.get("rnn_lm").reference()
    vocab, train_ids, _ = hidden.char_data()
    model = ref.RNNLM(len(vocab), **hidden.Q7_MODEL, layer=ref.LSTMLayer)
    start = time.process_time()
    ref.train_lm(model, train_ids, **hidden.Q7_SETTINGS)
    q7 = time.process_time() - start
    start = time.process_time()
    hidden.q8_accuracy_of(ref, np.random.default_rng(0), decoder=ref)
    return {"q7": q7, "q8": time.process_time() - start}


def main() -> None:
    from autograder.authoring import assignments, build
    pin = ["taskset", "-c", "0"] if "--cpu0" in sys.argv else []
    with tempfile.TemporaryDirectory() as tmp:
        notebook = Path(tmp) / "rnn_lm.ipynb"
        notebook.write_text(build.notebook(assignments.get("rnn_lm"), "solution"))
        out = subprocess.run(pin + [sys.executable, __file__, "--child", str(notebook)], capture_output=True,
                             text=True, check=True).stdout
    r = json.loads(next(line for line in out.splitlines() if line.startswith(MARKER))[len(MARKER):])
    where = "pinned to CPU 0" if pin else "unpinned"
    print(f"grading the staff solution ({where}): {r['wall']:.1f} s wall, grader {r['cpu']:.1f} s CPU, worker "
          f"{r['worker_cpu']:.1f} s CPU; score {r['score']:g}/{r['max']:g}; peak RSS grader {r['self_mb']:.0f} MB, "
          f"worker {r['worker_mb']:.0f} MB" + (f"; FAILED {r['failed']}" if r["failed"] else ""))
    times = reference_trainings()
    print(f"reference trainings in-process, one thread: Q7 {times['q7']:.1f} s CPU, Q8 {times['q8']:.1f} s CPU "
          "(the check time limits, 240 s and 180 s, are 10x or more of these)")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
