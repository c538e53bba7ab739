"""lmgrade: homework and autograder for a course on language models.

The engine's layout, and the path of a submission through it, are in docs/architecture.md.
"""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent  # the engine package: workers and bundles get copies of it


def check_notebook(path: str = "", assignment: str | None = None, question: int | str | None = None) -> None:
    """Run the public checks on this notebook (found automatically) or on `path`; `question=N` for one question.

    The checks run in a separate process on the saved file, exactly as the grader will see it.
    """
    from autograder.student.notebook import check_notebook as run
    run(path, assignment, question)


def export_answers(path: str = "", assignment: str | None = None) -> None:
    """Write the PDF of this notebook's written answers (found as check_notebook finds it) to upload.

    Run the figure cells and save the notebook first: the PDF is made from the saved file.
    """
    from autograder.student.notebook import export_answers as run
    run(path, assignment)
