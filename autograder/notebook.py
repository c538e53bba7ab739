"""`check_notebook()`: the public checks from inside a running notebook, on what the grader will see.

Why a module of its own: finding "this notebook" differs per front-end. VS Code puts the path in
the kernel's namespace (`__vsc_ipynb_file__`), Jupyter Server 2 in the kernel's environment
(`JPY_SESSION_NAME`), and Colab keeps the notebook in Drive and hands its current content to the
kernel on request. The student's cells always run in a separate worker process on the saved file,
exactly as `lmgrade check` and the grader run them.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from autograder.assignments import IDS


class NotebookNotFound(RuntimeError):
    """No way to tell which notebook to check: the message says what to pass."""


def locate(path: str | os.PathLike = "", *, namespace: dict | None = None, environ=None) -> tuple[Path, str]:
    """The notebook to check and a line saying which version of it is checked.

    Order: an explicit path; VS Code's `__vsc_ipynb_file__`; Jupyter's `JPY_SESSION_NAME`; Colab's
    open notebook (written to a temporary file); the one notebook in the working folder that names
    an assignment.
    """
    environ = os.environ if environ is None else environ
    namespace = _user_namespace() if namespace is None else namespace
    if path:
        found = Path(path).expanduser()
        if not found.exists():
            raise NotebookNotFound(f"{found} does not exist: give the notebook's file name, e.g. "
                                   "check_notebook(\"ngram.ipynb\"), and save it first.")
        return found, _saved_line(found)
    for candidate in (namespace.get("__vsc_ipynb_file__"), environ.get("JPY_SESSION_NAME")):
        if candidate and str(candidate).endswith(".ipynb") and Path(candidate).is_file():
            return Path(candidate), _saved_line(Path(candidate))
    live = _colab_notebook()
    if live is not None:
        return live, "Checked the notebook as it is open in Colab now (no need to save first)."
    here = [p for p in sorted(Path.cwd().glob("*.ipynb")) if any(i in p.stem for i in IDS)]
    if len(here) == 1:
        return here[0], _saved_line(here[0])
    listed = ", ".join(p.name for p in here) or "none"
    raise NotebookNotFound("Could not tell which notebook is running (notebooks here that name an assignment: "
                           f"{listed}). Pass its file name: check_notebook(\"ngram.ipynb\").")


def _user_namespace() -> dict:
    try:
        from IPython import get_ipython
    except ImportError:
        return {}
    shell = get_ipython()
    return dict(getattr(shell, "user_ns", {}) or {}) if shell is not None else {}


def _colab_notebook() -> Path | None:
    """Colab's open notebook, saved to a temporary file; None outside Colab."""
    if "google.colab" not in sys.modules:
        return None
    try:
        from google.colab import _message  # Colab's kernel-to-front-end channel
        reply = _message.blocking_request("get_ipynb", timeout_sec=30)
        notebook = reply["ipynb"]
    except Exception:  # noqa: BLE001 - any failure: fall back to files on disk
        return None
    name = (notebook.get("metadata", {}).get("lmgrade", {}) or {}).get("assignment", "notebook")
    folder = Path(tempfile.mkdtemp(prefix="lmgrade-colab-"))
    target = folder / f"{name}.ipynb"
    target.write_text(json.dumps(notebook))
    return target


def _saved_line(path: Path) -> str:
    age = time.time() - path.stat().st_mtime
    when = time.strftime("%H:%M:%S", time.localtime(path.stat().st_mtime))
    ago = f"{age:.0f} s" if age < 120 else f"{age / 60:.0f} min"
    return (f"Checked {path.name} as saved at {when} ({ago} ago): the grader reads the saved file, so save "
            "(Ctrl-S / Cmd-S) before checking newer edits.")


def check_notebook(path: str = "", assignment: str | None = None, question: int | str | None = None) -> None:
    """Run the public checks on this notebook (or `path`) and print the table.

    `question=2` runs only question 2's public checks (quicker while you work on it). The grading
    side runs in this kernel, where numpy and torch are usually imported already; the student's
    cells run in a fresh worker process, as on the grader.
    """
    from autograder import assignments, results, runner
    try:
        notebook, saved = locate(path)
        chosen = assignments.get(assignment or infer_assignment(notebook))
        questions = {str(question)} if question is not None else None
        if questions and not questions <= set(chosen.questions):
            raise ValueError(f"{chosen.id} has questions {', '.join(chosen.questions)}, not {question}")
    except (NotebookNotFound, LookupError, ValueError) as exc:
        print(exc)
        return
    report = runner.grade(notebook, chosen, device="cpu", public_only=True, questions=questions)
    print(saved)
    print(results.format_table(report, chosen.questions))
    print("These are the public checks only: hidden checks decide the final score.")


def infer_assignment(path: Path) -> str:
    """The assignment a notebook is for: its lmgrade metadata, else its file name."""
    from autograder.extract import NotebookError, parse_notebook
    try:
        meta = parse_notebook(Path(path).read_bytes()).get("metadata", {}).get("lmgrade", {})
        if isinstance(meta, dict) and meta.get("assignment") in IDS:
            return meta["assignment"]
    except (OSError, NotebookError, AttributeError):
        pass
    for assignment_id in IDS:
        if assignment_id in Path(path).stem:
            return assignment_id
    raise ValueError(f"cannot tell which assignment {Path(path).name} is for; pass assignment=\"ngram\" (or another id)")
