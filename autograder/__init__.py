"""lmgrade: homework and autograder for a course on language models."""
from __future__ import annotations


def check_notebook(path: str = "", assignment: str | None = None) -> None:
    """Run the public checks on a saved notebook from inside Jupyter (save the notebook first).

    The checks run in a separate process on the file on disk, exactly as the grader will see it.
    """
    import subprocess
    import sys

    command = [sys.executable, "-m", "autograder", "check", path]
    if assignment:
        command += ["--assignment", assignment]
    result = subprocess.run(command, capture_output=True, text=True)
    print(result.stdout + result.stderr)
