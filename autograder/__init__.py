"""lmgrade: homework and autograder for a course on language models."""
from __future__ import annotations


def check_notebook(path: str = "", assignment: str | None = None, question: int | str | None = None) -> None:
    """Run the public checks on this notebook (found automatically) or on `path`; `question=N` for one question.

    The checks run in a separate process on the saved file, exactly as the grader will see it.
    """
    from autograder.notebook import check_notebook as run
    run(path, assignment, question)
