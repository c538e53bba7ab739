"""Small helpers shared by tests."""
from autograder import assignments


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
    from autograder import build
    from autograder.checks import Context, seed_everything
    from autograder.errors import CheckFailed
    from autograder.remote import InProcessChannel, Student
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
