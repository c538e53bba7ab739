"""Small helpers shared by tests."""
import os

from autograder.authoring import assignments


def solution_text(assignment_id: str = "ngram") -> str:
    """The generated reference module: the staff solution's graded cells as one .py file."""
    return assignments.get(assignment_id).reference_path.read_text()


def edited_solution(assignment_id: str, replacements) -> str:
    """The staff solution with textual edits, each of which must match exactly once (a variant)."""
    text = solution_text(assignment_id)
    for old, new in replacements:
        assert text.count(old) == 1, f"the staff solution changed; update this variant: {old!r}"
        text = text.replace(old, new)
    return text


def failing_in_process(assignment_id: str, text: str, check_names: set) -> set:
    """The checks among `check_names` that fail for the module `text`, run in this process, no worker.

    Why: quick enough for bugs whose grading run would train models; the checks are the real ones.
    """
    from autograder.authoring import build
    from autograder.checking.checks import Context, seed_everything
    from autograder.errors import CheckFailed
    from autograder.checking.remote import InProcessChannel, Student
    assignment = assignments.get(assignment_id)
    student = Student(InProcessChannel(build.module_from_text(f"lmgrade_test_{assignment_id}_variant", text)))
    failed = set()
    for fn in assignment.checks():
        spec = fn.lmgrade_check
        if spec.name not in check_names:
            continue
        # a public check's expected values come from the reference here (as when its fixtures are recorded)
        ctx = Context(student=student, ref=assignment.reference(), spec=spec, recording={} if spec.public else None)
        seed_everything(ctx.seed)
        try:
            fn(ctx)
        except CheckFailed:
            failed.add(spec.name)
    return failed


def run_check_recording(assignment_id: str, submission, check_name: str, reference_results: dict,
                        published: list | None = None):
    """Run one check in this process on the module `submission`, with given cached reference results.

    Returns (the exception it raised or None, every array sent to the student's side), so a test
    can both fake a reference figure and see what crossed; `published` collects the leaderboard
    entries the check published, whatever its verdict.
    """
    import numpy as np

    from autograder.checking.checks import Context
    from autograder.checking.remote import InProcessChannel, Student
    assignment = assignments.get(assignment_id)
    fn = next(fn for fn in assignment.checks() if fn.lmgrade_check.name == check_name)
    sent = []

    class Recording(InProcessChannel):
        def request(self, message, arrays, timeout):
            sent.extend(np.asarray(a) for a in arrays)
            return super().request(message, arrays, timeout)

    ctx = Context(student=Student(Recording(submission)), ref=assignment.reference(), spec=fn.lmgrade_check,
                  cache_tag="test", reference_results=reference_results)
    try:
        fn(ctx)
    except Exception as exc:  # noqa: BLE001 - the caller asserts which
        return exc, sent
    finally:
        if published is not None:
            published.extend(ctx.published)
    return None, sent


def staff_module(assignment_id: str):
    """The staff solution as a fresh module, for tests that replace one of its functions."""
    import types
    module = types.ModuleType(f"lmgrade_test_{assignment_id}_staff")
    exec(solution_text(assignment_id), module.__dict__)  # noqa: S102 - the staff solution
    return module


def machine_pid(identity) -> int | None:
    """This machine's pid of the process that reported `identity` = (its /proc/self/ns/pid link, its
    os.getpid()), or None once it is gone.

    Why: a worker sees only its own PID namespace (its /proc is that namespace's), so its own pid is
    PID 2 there; the machine's /proc names it by its NSpid line."""
    ns, inner = identity[:2]
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{entry.name}/ns/pid") != ns:
                continue
            with open(f"/proc/{entry.name}/status") as f:
                nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if int(nspid[-1]) == inner:
            return int(entry.name)
    return None


def v2_mount():
    """Where cgroup v2 is mounted here (a Path), or None."""
    from pathlib import Path
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if "-" in fields and fields[fields.index("-") + 1] == "cgroup2":
            return Path(fields[4])
    return None
