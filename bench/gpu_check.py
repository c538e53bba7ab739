"""Everything that needs a real GPU, in one run that fits a short device lease (bench/gpu_check.sh).

Why one script: CUDA never runs in CI, and a session that is lent a GPU gets minutes of it, so the
checks that only a GPU can answer are prepared here and run in one go, each step bounded by the
time left. Steps, most important first:
1. the `gpu`-marked tests (each torch staff solution graded on CUDA in-process, a worker's tensors
   on CUDA);
2. `lmgrade grade --device cuda` on every torch staff solution (full marks expected) and on two
   known device bugs (each must lose the check that holds its device probe);
3. the simulated device against the real one: every device bug and every correct variant of
   tests/test_simulated_device.py graded on CUDA, on its question's checks. A bug the simulated
   device catches must be caught on CUDA too, and correct code must keep full marks there;
4. correct code written differently keeps full marks on CUDA: the torch assignments' styles of
   tests/test_correct_styles.py (an assignment's together), the correct variants of the variant
   files and of tests/test_property_matrix.py, each on the questions it touches.
Prints one line per case and a summary; exit status 1 if anything disagrees.

    python bench/gpu_check.py [--device cuda] [--budget SECONDS] [--jobs N] [--steps 1,2,3,4]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TORCH_ASSIGNMENTS = ("attention", "rnn_lm", "transformer")
GPU_TESTS = ["tests/test_primitives.py", "tests/test_attention_grading.py", "tests/test_rnn_lm_grading.py",
             "tests/test_transformer_grading.py", "tests/test_cli.py"]
# the two known device bugs graded end to end through the CLI (names from tests/test_simulated_device.BUGS)
KNOWN_BUGS = ("lm_loss builds its pad mask with torch.ones(N)",
              "generate seeds a CPU generator whatever the input's device")


def run(cmd: list[str], deadline: float, log) -> int:
    """Run `cmd`, its output into `log`, killed at `deadline` (exit 124 then)."""
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        return subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              timeout=max(1.0, deadline - time.monotonic())).returncode
    except subprocess.TimeoutExpired:
        log.write("(stopped: out of time)\n")
        return 124


def failed_checks(results_json: Path, assignment_id: str) -> tuple[set, float, float]:
    """(names of the checks that failed, score, maximum) from a Gradescope results file."""
    from autograder.authoring import assignments
    by_title = {f"Q{c.question} {c.title}": c.name
                for c in (fn.lmgrade_check for fn in assignments.get(assignment_id).checks())}
    data = json.loads(results_json.read_text())
    tests = data.get("tests", [])
    failed = {by_title.get(t["name"].removesuffix(" (extra credit)"), t["name"])
              for t in tests if t.get("status") != "passed"}
    return failed, data.get("score", 0.0), sum(t.get("max_score", 0) for t in tests)


def grade_case(case: tuple) -> tuple:
    """One variant graded on `device`, its questions' checks only: (name, kind, expected, failed, error)."""
    name, kind, assignment_id, text, questions, expected, device = case
    from autograder.authoring import assignments
    from autograder.grading import runner
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submission.py"
        path.write_text(text)
        try:
            report = runner.grade(path, assignments.get(assignment_id), device=device,
                                  questions={questions} if isinstance(questions, str) else questions)
        except Exception as exc:  # a grader fault is a finding too
            return name, kind, expected, set(), f"{type(exc).__name__}: {exc}"
    return name, kind, expected, {r.name for r in report.results if not r.passed}, None


def device_cases(device: str) -> list[tuple]:
    from tests import test_simulated_device as sim_tests
    from tests.helpers import edited_solution
    cases = []
    for name, (aid, edits, question, check) in sorted(sim_tests.BUGS.items()):
        expected = check if isinstance(check, set) else {check}
        cases.append((name, "bug", aid, edited_solution(aid, edits), question, expected, device))
    for name, (aid, edits, question) in sorted(sim_tests.CORRECT.items()):
        cases.append((name, "correct", aid, edited_solution(aid, edits), question, set(), device))
    return cases


def correct_cases(device: str) -> list[tuple]:
    """Step 4's cases: (name, "correct", assignment, text, questions, set(), device)."""
    from tests import test_attention_variants, test_correct_styles, test_property_matrix
    from tests import test_rnn_lm_variants, test_transformer_variants
    from tests.helpers import edited_solution
    cases = []
    for aid in TORCH_ASSIGNMENTS:  # an assignment's styles edit different code: one submission holds them all
        table = test_correct_styles.STYLES[aid]
        edits = [edit for replacements, _ in table.values() for edit in replacements]
        questions = set().union(*(questions for _, questions in table.values()))
        cases.append((f"{aid}: every correct style together", aid, edited_solution(aid, edits), questions))
    together = test_transformer_variants.CORRECT
    cases.append(("transformer: every correct variant together", "transformer",
                  edited_solution("transformer", [e for edits, _ in together.values() for e in edits]),
                  set().union(*(questions for _, questions in together.values()))))
    for name, edits in test_transformer_variants.TRAINING_CORRECT.items():
        cases.append((f"transformer: {name}", "transformer", edited_solution("transformer", edits), {"6"}))
    for aid, module in (("rnn_lm", test_rnn_lm_variants), ("attention", test_attention_variants)):
        for name, (edits, questions) in module.CORRECT.items():
            cases.append((f"{aid}: {name}", aid, edited_solution(aid, edits), questions))
    for name, (aid, edits, questions) in test_property_matrix.CORRECT.items():
        cases.append((f"{aid}: {name}", aid, edited_solution(aid, edits), set(questions)))
    return [(name, "correct", aid, text, questions, set(), device) for name, aid, text, questions in cases]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=420.0, help="seconds for all steps together")
    parser.add_argument("--jobs", type=int, default=max(1, min(8, (os.cpu_count() or 2) // 2)))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", tempfile.gettempdir())))
    parser.add_argument("--steps", default="1,2,3,4", help="which steps to run (1 and 2 go together)")
    args = parser.parse_args()
    steps = set(args.steps.split(","))
    deadline = time.monotonic() + args.budget
    args.out.mkdir(parents=True, exist_ok=True)
    python = sys.executable
    problems: list[str] = []

    # 1 and 2 together: the tests in one process group, the CLI gradings beside it
    if steps & {"1", "2"}:
        with open(args.out / "gpu_tests.log", "w") as tests_log, open(args.out / "gpu_grades.log", "w") as grades_log:
            tests = subprocess.Popen([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                                      "-n", "4", "-rs", *GPU_TESTS], cwd=ROOT, stdout=tests_log,
                                     stderr=subprocess.STDOUT)
            from tests import test_simulated_device as sim_tests
            from tests.helpers import edited_solution
            scratch = Path(tempfile.mkdtemp(prefix="lmgrade-gpu-"))
            jobs = []
            for aid in TORCH_ASSIGNMENTS:
                jobs.append((f"staff {aid}", aid, ROOT / "solutions" / f"{aid}.py", None))
            for bug in KNOWN_BUGS:
                aid, edits, _question, check = sim_tests.BUGS[bug]
                path = scratch / f"{aid}_device_bug.py"
                path.write_text(edited_solution(aid, edits))
                jobs.append((f"bug: {bug}", aid, path, {check} if isinstance(check, str) else check))
            started = []
            for label, aid, path, expected in jobs:
                out = scratch / f"{len(started)}.json"
                log = open(scratch / f"{len(started)}.log", "w")
                proc = subprocess.Popen([python, "-m", "autograder", "grade", str(path), "--assignment", aid,
                                         "--device", args.device, "--json", str(out)],
                                        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
                started.append((label, aid, proc, out, log, expected))
            for label, aid, proc, out, log, expected in started:
                try:
                    rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    rc = 124
                log.close()
                grades_log.write(f"==== {label} (exit {rc})\n{Path(log.name).read_text()}\n")
                if rc != 0 or not out.exists():
                    problems.append(f"{label}: lmgrade exit {rc}")
                    print(f"[grade] {label}: exit {rc}, no results (gpu_grades.log)")
                    continue
                failed, score, top = failed_checks(out, aid)
                if expected is None:
                    ok = not failed
                    print(f"[grade] {label}: {score:g}/{top:g}" + ("" if ok else f", failed {sorted(failed)}"))
                else:
                    ok = expected <= failed
                    print(f"[grade] {label}: {score:g}/{top:g}, failed {sorted(failed)}; "
                          f"{'caught' if ok else 'NOT caught'} by {sorted(expected)}")
                if not ok:
                    problems.append(label)
            try:
                rc = tests.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                tests.kill()
                rc = 124
        tail = (args.out / "gpu_tests.log").read_text().strip().splitlines()[-6:]
        print(f"[tests] gpu-marked tests exit {rc}: " + " | ".join(tail))
        if rc != 0:
            problems.append(f"gpu tests exit {rc}")

    # 3: the simulated device against the real one; 4: correct code written differently
    cases = (device_cases(args.device) if "3" in steps else []) + (correct_cases(args.device) if "4" in steps else [])
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(grade_case, case) for case in cases]
        try:
            for future in as_completed(futures, timeout=max(1.0, deadline - time.monotonic())):
                name, kind, expected, failed, error = future.result()
                if error:
                    verdict = f"GRADER ERROR {error}"
                elif kind == "bug":
                    verdict = ("caught" if expected <= failed else "NOT caught") + f" (failed {sorted(failed)})"
                else:
                    verdict = "full marks" if not failed else f"LOST {sorted(failed)}"
                print(f"[device] {kind:7} {name}: {verdict}")
                if error or (kind == "bug" and not expected <= failed) or (kind == "correct" and failed):
                    problems.append(name)
        except TimeoutError:
            done = sum(f.done() for f in futures)
            print(f"[device] out of time after {done}/{len(futures)} cases")
            problems.append("device cases unfinished")
            for future in futures:
                future.cancel()
    print("gpu_check: " + ("OK" if not problems else f"{len(problems)} problem(s): {problems}"))
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
