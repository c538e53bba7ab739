"""Which aten operators and torch functions correct code runs, and that the worker's guard bans none.

Why: `autograder/sandbox/guard.py` gives every aten operator in an assignment's `forbidden` families a
kernel that raises, and replaces the code of torch's Python routines of those names. A family that
also named an operator correct code needs would fail honest students. This runs the staff solution
(every check) and each correct variant of `tests/test_<assignment>_variants.py` (the checks of its
questions) in this process, records what the student's side runs (a TorchDispatchMode for aten
operators, a TorchFunctionMode for torch's Python API) and prints, per assignment, the operators
used and any that the guard would switch off (there must be none).

Run: .venv/bin/python bench/runtime_guard_ops.py [--assignment transformer] [--quick] [--tables CORRECT]
(--quick skips the trainings, the slow checks; --tables picks the tables of correct variants: a
variant of a table without questions, as TRAINING_CORRECT, runs every check, which takes long.)
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch.overrides import TorchFunctionMode, resolve_name  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from autograder.authoring import assignments, build  # noqa: E402
from autograder.checking.checks import Context, seed_everything  # noqa: E402
from autograder.checking.remote import InProcessChannel, Student  # noqa: E402
from autograder.errors import CheckFailed  # noqa: E402
from autograder.sandbox import forbidden, guard  # noqa: E402
from tests.helpers import edited_solution  # noqa: E402

ASSIGNMENTS = ("transformer", "rnn_lm", "attention")


class Ops(TorchDispatchMode):
    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(str(func.name()).removeprefix("aten::"))
        return func(*args, **(kwargs or {}))


class Calls(TorchFunctionMode):
    def __init__(self, seen: set):
        super().__init__()
        self.seen = seen

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.add(resolve_name(func) or getattr(func, "__name__", "?"))
        return func(*args, **(kwargs or {}))


class Logged(InProcessChannel):
    """Answers as the worker does, recording what the student's side runs."""

    def __init__(self, module, ops: set, calls: set):
        super().__init__(module)
        self.ops, self.calls = ops, calls

    def request(self, message, arrays, timeout):
        with Calls(self.calls), Ops(self.ops):
            return super().request(message, arrays, timeout)


TABLES = ("CORRECT", "HUNT_CORRECT", "SEQ2SEQ_CORRECT", "TRAINING_CORRECT")


def variants(assignment_id: str, tables=TABLES) -> tuple[dict, set]:
    """name -> (replacements, questions): the staff solution, then every correct variant the tests keep."""
    out = {"staff solution": ([], None)}
    tests = importlib.import_module(f"tests.test_{assignment_id}_variants")
    for table in tables:
        for name, value in getattr(tests, table, {}).items():
            replacements, questions = value if isinstance(value, tuple) else (value, None)
            out[name] = (replacements, questions)
    return out, getattr(tests, "TRAININGS", set())


def run(assignment_id: str, quick: bool, tables=TABLES) -> tuple[set, set, list]:
    assignment = assignments.get(assignment_id)
    table, trainings = variants(assignment_id, tables)
    ops, calls, failed = set(), set(), []
    for name, (replacements, questions) in table.items():
        try:
            text = edited_solution(assignment_id, replacements)
        except AssertionError:
            failed.append(f"{name}: the staff solution changed (variant skipped)")
            continue
        module = build.module_from_text(f"lmgrade_ops_{assignment_id}", text)
        student = Student(Logged(module, ops, calls))
        for fn in assignment.checks():
            spec = fn.lmgrade_check
            if questions is not None and spec.question not in questions:
                continue
            if quick and (spec.name in trainings or "train" in spec.name):
                continue
            ctx = Context(student=student, ref=assignment.reference(), spec=spec,
                          recording={} if spec.public else None)
            seed_everything(ctx.seed)
            try:
                fn(ctx)
            except CheckFailed as exc:
                failed.append(f"{name}: {spec.name}: {str(exc)[:120]}")
            except Exception as exc:  # noqa: BLE001 - a check's own bug: the ops it ran so far still count
                failed.append(f"{name}: {spec.name}: the check itself raised {type(exc).__name__}: {str(exc)[:120]}")
    return ops, calls, failed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--assignment", choices=ASSIGNMENTS, action="append")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--tables", nargs="*", default=TABLES, help="which tables of correct variants")
    args = parser.parse_args()
    every_bad = []
    for assignment_id in args.assignment or ASSIGNMENTS:
        banned = forbidden.Banned(assignments.get(assignment_id).forbidden)
        switched_off = set(guard.banned_ops(torch, banned.routine))
        ops, calls, failed = run(assignment_id, args.quick, args.tables)
        bad_ops = sorted(op for op in ops if op in switched_off or banned.routine(op.partition(".")[0]))
        bad_calls = sorted(c for c in calls if banned.in_path(c))
        print(f"## {assignment_id}: {len(ops)} aten operators, {len(calls)} torch functions; "
              f"{len(switched_off)} operators switched off")
        print("aten:", ", ".join(sorted(ops)))
        print("banned among them:", bad_ops or "none", "| torch functions banned:", bad_calls or "none")
        for line in failed:
            print("  check failed in process:", line)
        every_bad += bad_ops + bad_calls
    sys.exit(1 if every_bad else 0)


if __name__ == "__main__":
    main()
