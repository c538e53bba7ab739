"""Small helpers shared by tests."""
from autograder import assignments


def solution_text(assignment_id: str = "ngram") -> str:
    """The generated reference module: the staff solution's graded cells as one .py file."""
    return assignments.get(assignment_id).reference_path.read_text()
