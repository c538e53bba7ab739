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
