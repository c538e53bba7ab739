"""`check_notebook()`: the public checks from inside a running notebook, on what the grader will see.

Why a module of its own: finding "this notebook" differs per front-end, and a wrong guess grades
a file the student is not looking at. VS Code puts the path in the kernel's namespace
(`__vsc_ipynb_file__`); a Jupyter server knows each kernel's notebook under its current name (its
sessions API), while the kernel's environment (`JPY_SESSION_NAME`) keeps the name it was started
for, stale after a rename; Colab keeps the notebook in Drive and hands its current content to the
kernel on request; `jupyter nbconvert --execute` says nothing, and the kernel runs in the
notebook's folder. The student's cells always run in a separate worker process on the saved
file, exactly as `lmgrade check` and the grader run them.
"""
from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from autograder.authoring.assignments import IDS
from autograder.errors import GraderFault


class NotebookNotFound(RuntimeError):
    """No way to tell which notebook to check: the message says what to pass."""


RESTART = "if you renamed the notebook, restart the kernel or pass its new name"


@dataclass(frozen=True)
class Kernel:
    """What this kernel can tell about itself: Jupyter's id for it, when its process started, and the
    folders where Jupyter servers on this machine list themselves. Empty outside a kernel."""
    id: str | None = None
    started: float | None = None
    runtime_dirs: tuple[Path, ...] = ()


def locate(path: str | os.PathLike = "", *, namespace: dict | None = None, environ=None,
           assignment: str | None = None, kernel: Kernel | None = None, now: float | None = None) -> tuple[Path, str]:
    """The notebook to check and the lines to print about it (which saved version, any doubt).

    Order: an explicit path; VS Code's `__vsc_ipynb_file__`; the notebook the Jupyter server runs
    this kernel for, under its current name; `JPY_SESSION_NAME`; Colab's open notebook (written
    to a temporary file); the one notebook of this assignment in the working folder. The first two
    and the server's answer are certain. The other guesses never take a file of another assignment
    than this kernel's (`assignment`, else `kernel_assignment`), and when the kernel runs under a
    Jupyter server they say so when the file was last saved before the kernel started or another
    notebook of the assignment was saved since: after a rename or Save As, that file is the old one.
    """
    environ = os.environ if environ is None else environ
    namespace = _user_namespace() if namespace is None else namespace
    kernel = this_kernel() if kernel is None else kernel
    now = time.time() if now is None else now
    expected = assignment or kernel_assignment(namespace, environ)
    if path:
        found = Path(path).expanduser()
        if not found.is_file():
            raise NotebookNotFound(f"{found} does not exist: give the notebook's file name, e.g. "
                                   f"check_notebook(\"{_example(expected)}\"), and save it first.")
        return found, _saved_line(found, now) + _other_assignment_note(found, expected, bool(assignment))
    vscode = namespace.get("__vsc_ipynb_file__")
    if _is_notebook(vscode):
        vscode = Path(vscode)
        return vscode, _saved_line(vscode, now) + _other_assignment_note(vscode, expected, bool(assignment))
    live = live_notebook(kernel)
    if live is not None:
        if not live.is_file():
            raise NotebookNotFound(f"Jupyter runs this kernel for {live.name}, which is not saved yet: save it "
                                   "(Ctrl-S / Cmd-S) and check again.")
        return live, _saved_line(live, now) + _other_assignment_note(live, expected, bool(assignment))
    first = environ.get("JPY_SESSION_NAME")
    if _is_notebook(first) and (expected is None or assignment_of(Path(first)) in (None, expected)):
        return Path(first), _saved_line(Path(first), now) + stale_note(Path(first), kernel.started, expected)
    live = _colab_notebook()
    if live is not None:
        return live, "Checking the notebook as it is open in Colab now (no need to save first)."
    here = folder_notebooks(Path.cwd(), expected)
    if len(here) == 1:
        note = stale_note(here[0], kernel.started, expected) if first else ""  # nbconvert: no server, no doubt
        return here[0], _saved_line(here[0], now) + note
    raise NotebookNotFound(_not_found(here, expected, Path.cwd()))


def _is_notebook(candidate) -> bool:
    return bool(candidate) and str(candidate).endswith(".ipynb") and Path(candidate).is_file()


def _not_found(here: list[Path], expected: str | None, folder: Path) -> str:
    if here:
        what = f"notebooks of {expected}" if expected else "notebooks here that name an assignment"
        return (f"Could not tell which notebook is running ({what}: {', '.join(p.name for p in here)}). "
                f"Pass its file name: check_notebook(\"{_example(expected, here)}\"); {RESTART}.")
    what = f"no {expected} notebook" if expected else "no notebook that names an assignment"
    return (f"Could not tell which notebook is running: {what} in {folder}. Save it, then pass its file "
            f"name: check_notebook(\"{_example(expected)}\"); {RESTART}.")


def _example(expected: str | None, names: list[Path] = ()) -> str:
    """A file name to show in `check_notebook("...")`: never one of another assignment."""
    return names[0].name if names else f"{expected or 'homework'}.ipynb"


# --- which notebook the Jupyter server runs this kernel for ---------------------------------------

def this_kernel() -> Kernel:
    """This process's kernel id, start time and Jupyter runtime folders; empty when not an ipykernel."""
    if "ipykernel" not in sys.modules:  # not a kernel: nothing to ask, and no import cost
        return Kernel()
    try:
        from ipykernel import get_connection_file
        connection = Path(get_connection_file())
    except Exception:  # noqa: BLE001 - an embedded or unusual kernel: fall back to the other methods
        return Kernel()
    dirs = [connection.parent]
    try:
        from jupyter_core.paths import jupyter_runtime_dir
        dirs.append(Path(jupyter_runtime_dir()))
    except Exception:  # noqa: BLE001 - jupyter_core absent or broken: the connection file's folder only
        pass
    return Kernel(kernel_id(connection), _process_started(connection), tuple(dict.fromkeys(dirs)))


def kernel_id(connection_file: str | os.PathLike) -> str | None:
    """Jupyter names a kernel's connection file `kernel-<id>.json`."""
    match = re.fullmatch(r"kernel-(.+)\.json", Path(connection_file).name)
    return match.group(1) if match else None


def _process_started(connection: Path) -> float | None:
    """When this kernel process started (a restart is a new process); else its connection file's mtime."""
    try:
        import psutil  # an ipykernel dependency
        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001
        pass
    try:
        return connection.stat().st_mtime
    except OSError:
        return None


def live_notebook(kernel: Kernel, timeout: float = 1.0) -> Path | None:
    """The notebook a Jupyter server on this machine runs `kernel` for, under its current name."""
    if not kernel.id:
        return None
    for server in running_servers(kernel.runtime_dirs):
        sessions = ask_sessions(server, timeout)
        found = session_notebook(sessions, kernel.id, server.get("root_dir") or server.get("notebook_dir") or "")
        if found is not None:
            return found
    return None


def running_servers(runtime_dirs) -> list[dict]:
    """The servers' own descriptions (`jpserver-*.json`, `nbserver-*.json` for Notebook 6), newest first.

    Read directly rather than through `jupyter_server.serverapp.list_running_servers`, which need
    not be installed in the kernel's environment; a stale file only costs a refused connection.
    """
    files = [f for folder in runtime_dirs for pattern in ("jpserver-*.json", "nbserver-*.json")
             for f in Path(folder).glob(pattern)]
    servers = []
    for file in sorted(set(files), key=_mtime, reverse=True)[:8]:
        try:
            info = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict):
            servers.append(info)
    return servers


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # a login page is a "no": never follow it elsewhere
        return None


def ask_sessions(server: dict, timeout: float = 1.0) -> list:
    """GET `api/sessions` from a server on this machine, with its token; [] on any failure.

    Loopback only, plain HTTP only (a TLS or Unix-socket server is skipped), no proxy: the token
    must not leave the machine.
    """
    port, base = server.get("port"), str(server.get("base_url") or "/").strip("/")
    if not isinstance(port, int) or server.get("secure") or server.get("sock"):
        return []
    route = "/".join(part for part in (base, "api/sessions") if part)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    for host in ("127.0.0.1", "[::1]"):  # a server on "localhost" may listen on either
        request = urllib.request.Request(f"http://{host}:{port}/{route}",
                                         headers={"Authorization": f"token {server.get('token') or ''}"})
        try:
            with opener.open(request, timeout=timeout) as reply:
                sessions = json.loads(reply.read(4_000_000))
            return sessions if isinstance(sessions, list) else []
        except urllib.error.HTTPError:  # it answered, and said no (a password, not a token)
            return []
        except Exception:  # noqa: BLE001 - refused, timed out, not JSON: the other address, then the next method
            continue
    return []


def session_notebook(sessions: list, kernel_id: str, root_dir: str | os.PathLike) -> Path | None:
    """The saved notebook of the session that runs `kernel_id` (paths are relative to the server's
    root, saved or not); None when there is none, or several notebooks share the kernel."""
    paths = set()
    for session in sessions:
        if not isinstance(session, dict) or (session.get("kernel") or {}).get("id") != kernel_id:
            continue
        rel = session.get("path") or (session.get("notebook") or {}).get("path")
        if isinstance(rel, str) and rel.endswith(".ipynb"):
            paths.add(Path(root_dir).expanduser() / rel)
    return paths.pop() if len(paths) == 1 else None


# --- which assignment this kernel works on ----------------------------------------------------------

def kernel_assignment(namespace: dict, environ) -> str | None:
    """The assignment this kernel works on: the one whose graded functions and classes it defines
    (names no other assignment uses), else the one named by the notebook Jupyter started it for."""
    defined = {name for name, value in namespace.items()
               if callable(value) and getattr(value, "__module__", None) == "__main__"}
    names = graded_names() if defined else {}
    score = {a: len(defined & (own - set().union(*(n for b, n in names.items() if b != a))))
             for a, own in names.items()}
    best = sorted(score.items(), key=lambda item: -item[1])
    if best and best[0][1] > 0 and (len(best) == 1 or best[1][1] < best[0][1]):
        return best[0][0]
    first = environ.get("JPY_SESSION_NAME")
    return assignment_of(Path(first)) if first else None


def graded_names() -> dict[str, set[str]]:
    """Names defined in the graded cells of each available starter notebook."""
    from autograder.authoring import assignments
    from autograder.sandbox import extract
    names = {}
    for assignment in assignments.available():
        if assignment.starter_path.is_file():
            names[assignment.id] = set(extract.read_submission(assignment.starter_path).graded_names)
    return names


def assignment_of(path: Path) -> str | None:
    """`infer_assignment` without the error: a missing file is judged by its name."""
    try:
        return infer_assignment(path)
    except ValueError:
        return None


def folder_notebooks(folder: Path, expected: str | None) -> list[Path]:
    """Notebooks in `folder` of assignment `expected` (of any assignment when None), by name."""
    found = []
    for path in sorted(folder.glob("*.ipynb")):
        of = assignment_of(path)
        if of is not None and (expected is None or of == expected):
            found.append(path)
    return found


# --- what to say about the file checked ----------------------------------------------------------

def stale_note(found: Path, started: float | None, expected: str | None) -> str:
    """Lines of doubt about a guessed notebook: saved before this kernel started, or another notebook
    of the same assignment saved since. Empty when neither (or the kernel's start is unknown)."""
    saved = found.stat().st_mtime
    newer = [p for p in folder_notebooks(found.parent, expected or assignment_of(found))
             if p != found and _mtime(p) > max(saved, started or 0.0)]
    newer.sort(key=_mtime, reverse=True)
    lines = []
    if started is not None and saved < started:
        lines.append(f"Warning: {found.name} was last saved {_duration(started - saved)} before this kernel started "
                     f"(at {_clock(started)}): is it the notebook you are running? (renamed, or Save As?)")
    if newer:
        lines.append(f"Warning: {', '.join(p.name for p in newer)} {'was' if len(newer) == 1 else 'were'} saved "
                     f"more recently than {found.name}: is that the notebook you are running? (renamed, or Save As?)")
    if lines:
        lines.append(f"If you renamed the notebook, restart the kernel or pass its new name: "
                     f"check_notebook(\"{newer[0].name if newer else 'NEW NAME.ipynb'}\").")
    return "".join("\n" + line for line in lines)


def _other_assignment_note(found: Path, expected: str | None, asked: bool) -> str:
    """Never check a notebook of another assignment than the kernel's (or the one asked for) unsaid."""
    own = assignment_of(found)
    if expected is None or own is None or own == expected:
        return ""
    if asked:
        return f"\nNote: {found.name} says it is a notebook of {own}; it is checked as {expected}, as asked."
    return f"\nNote: {found.name} is a notebook of {own}, but this kernel works on {expected}: {own}'s checks run."


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(when))


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _saved_line(path: Path, now: float | None = None) -> str:
    mtime = path.stat().st_mtime
    ago = _duration((time.time() if now is None else now) - mtime)
    return (f"Checking {path.name} as saved at {_clock(mtime)} ({ago} ago): the grader reads the saved file, so "
            "save (Ctrl-S / Cmd-S) before checking newer edits.")


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


def progress_line(assignment_id: str, questions=None) -> str:
    """What `check_notebook` and `lmgrade check` print before the worker starts (it takes seconds)."""
    if not questions:
        return f"running the public checks of {assignment_id}..."
    chosen = sorted(map(str, questions), key=lambda q: (len(q), q))
    if len(chosen) == 1:
        return f"running Q{chosen[0]}'s public checks ({assignment_id})..."
    return f"running the public checks of {', '.join('Q' + q for q in chosen)} ({assignment_id})..."


def check_notebook(path: str = "", assignment: str | None = None, question: int | str | None = None) -> None:
    """Run the public checks on this notebook (or `path`) and print the table.

    `question=2` runs only question 2's public checks (quicker while you work on it). The grading
    side runs in this kernel, where numpy and torch are usually imported already; the student's
    cells run in a fresh worker process, as on the grader. The time of the call is taken first:
    the saved file's age is measured from it, and `locate` compares the file with the kernel's
    start to warn about an old name (rename, Save As) instead of grading it silently.
    """
    called = time.time()
    from autograder.authoring import assignments
    from autograder.grading import results, runner
    try:
        notebook, saved = locate(path, assignment=assignment, now=called)
        chosen = assignments.get(assignment or infer_assignment(notebook))
        questions = {str(question)} if question is not None else None
        if questions and not questions <= set(chosen.questions):
            raise ValueError(f"{chosen.id} has questions {', '.join(chosen.questions)}, not {question}")
    except (NotebookNotFound, LookupError, ValueError) as exc:
        print(exc)
        return
    print(saved)
    print(progress_line(chosen.id, questions), flush=True)
    try:
        report = runner.grade(notebook, chosen, device="cpu", public_only=True, questions=questions)
    except GraderFault as exc:  # the grader's side, not the student's code: no table that looks like a score
        print(f"The checks could not run on this machine (this is not about your code): {results.clean(exc)}")
        return
    print(results.format_table(report, chosen.questions))
    print("These are the public checks only: hidden checks decide the final score.")


def export_answers(path: str = "", assignment: str | None = None) -> None:
    """`lmgrade export` for the notebook that is open: its written answers as a PDF beside it."""
    from autograder.student import export
    try:
        notebook, saved = locate(path, assignment=assignment, now=time.time())
        print(saved)
        written, how = export.export(notebook)
    except (NotebookNotFound, LookupError, ValueError, export.ExportError) as exc:
        print(exc)
        return
    print(f"wrote {written}: {how}")


def infer_assignment(path: Path) -> str:
    """The assignment a notebook is for: its lmgrade metadata, else its file name."""
    from autograder.sandbox.extract import NotebookError, parse_notebook
    try:
        meta = parse_notebook(Path(path).read_bytes()).get("metadata", {}).get("lmgrade", {})
        if isinstance(meta, dict) and meta.get("assignment") in IDS:
            return meta["assignment"]
    except (OSError, NotebookError, AttributeError):
        pass
    for assignment_id in IDS:
        if assignment_id in Path(path).stem:
            return assignment_id
    raise ValueError(f"cannot tell which assignment {Path(path).name} is for; pass assignment=\"...\", "
                     f"one of {', '.join(IDS)}")
