"""check_notebook() finds the running notebook in each front-end and checks what the grader will see.

Jupyter's sessions API is played by a tiny HTTP server on 127.0.0.1 (a real `jupyter server` is not
installed here, and would take seconds to start); the kernel (its id, start time, runtime folder)
is passed in, so no test needs a running kernel.
"""
import http.server
import json
import os
import shutil
import sys
import threading
import time
import types

import pytest

from autograder import cli
from autograder.authoring import assignments
from autograder.grading import runner
from autograder.student import notebook

STARTER = assignments.get("ngram").starter_path
ATTENTION = assignments.get("attention").starter_path
TOKEN = "s3cret"
NOW = time.time()
KERNEL_START = NOW - 600  # the kernel started 10 minutes ago


def saved(path, source, when):
    """Write a notebook and date its last save."""
    shutil.copy(source, path)
    os.utime(path, (when, when))
    return path


def defined_in_notebook(*names):
    """A kernel namespace where the student's cells defined these functions."""
    namespace = {}
    for name in names:
        def fn():
            pass
        fn.__module__ = "__main__"
        namespace[name] = fn
    return namespace


@pytest.fixture
def jupyter(tmp_path):
    """A stand-in Jupyter server: `jupyter.sessions` is what GET /api/sessions answers (with the token)."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            server.asked.append((self.path, self.headers.get("Authorization")))
            if self.path != "/api/sessions" or self.headers.get("Authorization") != f"token {TOKEN}":
                self.send_error(403)
                return
            body = json.dumps(server.sessions).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.sessions, server.asked = [], []
    server.runtime = tmp_path / "runtime"
    server.runtime.mkdir()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def serve_root(server, root, token=TOKEN):
    """Describe the server in the runtime folder, as `jupyter lab` does in jpserver-<pid>.json."""
    info = {"base_url": "/", "hostname": "localhost", "port": server.server_address[1], "secure": False,
            "sock": "", "token": token, "root_dir": str(root), "pid": os.getpid(), "version": "2.14.0"}
    (server.runtime / "jpserver-4242.json").write_text(json.dumps(info))


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    return tmp_path


def test_explicit_path_and_saved_age(folder):
    target = saved(folder / "ngram (1).ipynb", STARTER, NOW - 90)
    found, line = notebook.locate(str(target), namespace={}, environ={}, now=NOW)
    assert found == target and "as saved at" in line and "(90 s ago)" in line
    with pytest.raises(notebook.NotebookNotFound, match="does not exist"):
        notebook.locate("missing.ipynb", namespace={}, environ={})


def test_vscode_then_jupyter_session(folder):
    vscode, lab = folder / "a" / "mine.ipynb", folder / "b" / "lab.ipynb"
    for path in (vscode, lab):
        path.parent.mkdir()
        shutil.copy(STARTER, path)
    env = {"JPY_SESSION_NAME": str(lab)}
    assert notebook.locate(namespace={"__vsc_ipynb_file__": str(vscode)}, environ=env)[0] == vscode
    assert notebook.locate(namespace={}, environ=env)[0] == lab


def test_colab_hands_over_the_open_notebook(folder, monkeypatch):
    content = json.loads(STARTER.read_text())
    message = types.ModuleType("google.colab._message")
    message.blocking_request = lambda request, timeout_sec=None: {"ipynb": content} if request == "get_ipynb" else None
    colab = types.ModuleType("google.colab")
    colab._message = message
    monkeypatch.setitem(sys.modules, "google", types.ModuleType("google"))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setitem(sys.modules, "google.colab._message", message)
    found, line = notebook.locate(namespace={}, environ={})
    assert json.loads(found.read_text()) == content and found.name == "ngram.ipynb"
    assert "open in Colab" in line


def test_only_notebook_in_folder_or_a_clear_message(folder):
    with pytest.raises(notebook.NotebookNotFound, match="pass its file name.*restart the kernel"):
        notebook.locate(namespace={}, environ={})
    shutil.copy(STARTER, folder / "ngram (1).ipynb")
    assert notebook.locate(namespace={}, environ={})[0].name == "ngram (1).ipynb"
    shutil.copy(STARTER, folder / "ngram (2).ipynb")
    with pytest.raises(notebook.NotebookNotFound, match=r"ngram \(1\).ipynb, ngram \(2\).ipynb"):
        notebook.locate(namespace={}, environ={})


def test_check_one_question(folder, capsys, monkeypatch):
    shutil.copy(STARTER, folder / "ngram (1).ipynb")
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    notebook.check_notebook(question=2)
    out = capsys.readouterr().out
    assert "Checking ngram (1).ipynb as saved" in out
    assert "Q2" in out and "Q1 " not in out and "not implemented yet" in out
    notebook.check_notebook(question=9)
    assert "not 9" in capsys.readouterr().out


def test_assignment_from_metadata_then_name(tmp_path):
    renamed = tmp_path / "homework.ipynb"
    shutil.copy(STARTER, renamed)
    assert notebook.infer_assignment(renamed) == "ngram"
    (tmp_path / "attention-final.ipynb").write_text("{}")
    assert notebook.infer_assignment(tmp_path / "attention-final.ipynb") == "attention"
    with pytest.raises(ValueError, match="pass assignment="):
        notebook.infer_assignment(tmp_path / "x.ipynb")


def test_server_pieces_read_what_jupyter_writes(tmp_path):
    assert notebook.kernel_id(tmp_path / "kernel-4f3c-99.json") == "4f3c-99"
    assert notebook.kernel_id(tmp_path / "jpserver-1.json") is None
    (tmp_path / "jpserver-1.json").write_text('{"port": 1, "token": "t"}')
    (tmp_path / "jpserver-2.json").write_text("not json")
    (tmp_path / "other.json").write_text('{"port": 3}')
    assert notebook.running_servers([tmp_path]) == [{"port": 1, "token": "t"}]
    sessions = [{"path": "hw/attention.ipynb", "type": "notebook", "kernel": {"id": "other"}},
                {"path": "console-1", "type": "console", "kernel": {"id": "mine"}},
                {"path": "hw/attention-v2.ipynb", "type": "notebook", "kernel": {"id": "mine"}}]
    assert notebook.session_notebook(sessions, "mine", tmp_path) == tmp_path / "hw" / "attention-v2.ipynb"
    assert notebook.session_notebook(sessions, "gone", tmp_path) is None
    shared = sessions + [{"path": "hw/x.ipynb", "kernel": {"id": "mine"}}]  # two notebooks on one kernel: no guess
    assert notebook.session_notebook(shared, "mine", tmp_path) is None
    assert notebook.session_notebook([None, "x", {"kernel": None}], "mine", tmp_path) is None


def test_renamed_notebook_the_server_names_the_new_file(folder, jupyter):
    """File > Rename with the kernel running: JPY_SESSION_NAME keeps the first name, whose file
    still exists (a second download); the server knows the new name, and that one is checked."""
    old = saved(folder / "attention.ipynb", ATTENTION, NOW - 60)  # saved since the kernel started, too
    new = saved(folder / "attention-final.ipynb", ATTENTION, NOW - 30)
    jupyter.sessions = [{"path": "attention.ipynb", "type": "notebook", "kernel": {"id": "another-kernel"}},
                        {"path": "attention-final.ipynb", "type": "notebook", "kernel": {"id": "k-123"}}]
    serve_root(jupyter, folder)
    kernel = notebook.Kernel("k-123", KERNEL_START, (jupyter.runtime,))
    env = {"JPY_SESSION_NAME": str(old)}
    found, line = notebook.locate(namespace={}, environ=env, kernel=kernel, now=NOW)
    assert found == new and "Checking attention-final.ipynb" in line and "Warning" not in line
    assert jupyter.asked == [("/api/sessions", f"token {TOKEN}")]


def test_a_server_that_says_no_falls_back_to_the_first_name_with_a_warning(folder, jupyter):
    old = saved(folder / "attention.ipynb", ATTENTION, NOW - 3600)  # before the kernel started
    saved(folder / "attention-final.ipynb", ATTENTION, NOW - 30)
    jupyter.sessions = [{"path": "attention-final.ipynb", "kernel": {"id": "k-123"}}]
    serve_root(jupyter, folder, token="wrong")  # a password-protected server refuses the token
    kernel = notebook.Kernel("k-123", KERNEL_START, (jupyter.runtime,))
    found, line = notebook.locate(namespace={}, environ={"JPY_SESSION_NAME": str(old)}, kernel=kernel, now=NOW)
    assert jupyter.asked and found == old
    assert "before this kernel started" in line and "renamed, or Save As?" in line
    assert "attention-final.ipynb was saved more recently" in line
    assert 'restart the kernel or pass its new name: check_notebook("attention-final.ipynb")' in line


def test_save_as_old_file_older_than_the_kernel_is_never_checked_silently(folder):
    """Save As (or a rename) without a server to ask: the first name's file is older than the kernel."""
    old = saved(folder / "ngram.ipynb", STARTER, NOW - 3600)
    env = {"JPY_SESSION_NAME": str(old)}
    kernel = notebook.Kernel("k-1", KERNEL_START, ())
    found, line = notebook.locate(namespace={}, environ=env, kernel=kernel, now=NOW)
    assert found == old
    assert "ngram.ipynb was last saved 50 min before this kernel started" in line
    assert "restart the kernel or pass its new name" in line
    # saved since the kernel started, and no other notebook of ngram newer: nothing to doubt
    os.utime(old, (NOW - 60, NOW - 60))
    assert "Warning" not in notebook.locate(namespace={}, environ=env, kernel=kernel, now=NOW)[1]
    # the Save As copy was saved after the old file: named, though the old one was saved since the start
    saved(folder / "ngram-v2.ipynb", STARTER, NOW - 10)
    line = notebook.locate(namespace={}, environ=env, kernel=kernel, now=NOW)[1]
    assert "ngram-v2.ipynb was saved more recently than ngram.ipynb" in line
    # a folder guess outside a Jupyter server (nbconvert --execute) is not doubted
    os.remove(folder / "ngram-v2.ipynb")
    os.utime(old, (NOW - 3600, NOW - 3600))
    found, line = notebook.locate(namespace={}, environ={}, kernel=kernel, now=NOW)
    assert found == old and "Warning" not in line


def test_another_assignments_notebook_is_never_suggested_nor_checked(folder, capsys, monkeypatch):
    """An attention kernel whose folder holds only ngram.ipynb (attention.ipynb was renamed away)."""
    saved(folder / "ngram.ipynb", STARTER, NOW - 60)
    monkeypatch.setattr(runner, "grade", lambda *a, **k: pytest.fail("another assignment's notebook was graded"))
    renamed_away = {"JPY_SESSION_NAME": str(folder / "attention.ipynb")}
    attention_cells = defined_in_notebook("scaled_dot_product_attention", "causal_mask")
    for namespace, env in [({}, renamed_away), (attention_cells, {}), (attention_cells, renamed_away)]:
        with pytest.raises(notebook.NotebookNotFound) as caught:
            notebook.locate(namespace=namespace, environ=env, kernel=notebook.Kernel(), now=NOW)
        message = str(caught.value)
        assert "ngram" not in message and "no attention notebook" in message
        assert 'check_notebook("attention.ipynb")' in message
        assert "if you renamed the notebook, restart the kernel or pass its new name" in message
    # the kernel's first name is a notebook of another assignment: not taken either
    with pytest.raises(notebook.NotebookNotFound, match="no attention notebook"):
        notebook.locate(namespace=attention_cells, environ={"JPY_SESSION_NAME": str(folder / "ngram.ipynb")},
                        kernel=notebook.Kernel(), now=NOW)
    # and from the check cell: one message, nothing graded
    monkeypatch.setattr(notebook, "_user_namespace", lambda: attention_cells)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    notebook.check_notebook()
    out = capsys.readouterr().out
    assert "no attention notebook" in out and "ngram" not in out


def test_a_certain_notebook_of_another_assignment_is_checked_with_a_note(folder):
    target = saved(folder / "ngram.ipynb", STARTER, NOW - 60)
    attention_cells = defined_in_notebook("scaled_dot_product_attention", "causal_mask")
    line = notebook.locate(namespace={**attention_cells, "__vsc_ipynb_file__": str(target)}, environ={},
                           kernel=notebook.Kernel(), now=NOW)[1]
    assert "ngram.ipynb is a notebook of ngram, but this kernel works on attention" in line
    line = notebook.locate(str(target), namespace={}, environ={}, assignment="attention", now=NOW)[1]
    assert "checked as attention, as asked" in line


def test_kernel_assignment_from_the_graded_names_it_defines():
    assert notebook.kernel_assignment(defined_in_notebook("causal_mask", "split_heads"), {}) == "attention"
    assert notebook.kernel_assignment(defined_in_notebook("TransformerLM", "apply_rope"), {}) == "transformer"
    shared = defined_in_notebook("MultiHeadAttention", "apply_rope")  # both attention and transformer
    assert notebook.kernel_assignment(shared, {}) is None
    assert notebook.kernel_assignment(shared, {"JPY_SESSION_NAME": "/hw/rnn_lm (2).ipynb"}) == "rnn_lm"
    imported = defined_in_notebook("causal_mask")
    imported["causal_mask"].__module__ = "somelib"  # imported, not written in the notebook
    assert notebook.kernel_assignment(imported, {}) is None


def test_progress_is_printed_before_the_worker_starts(folder, capsys, monkeypatch):
    target = saved(folder / "ngram (1).ipynb", STARTER, NOW - 60)
    printed = []

    def grade(path, assignment, **kwargs):
        printed.append(capsys.readouterr().out)
        return runner.Report(assignment=assignment.id, submission=str(path), device="cpu")

    monkeypatch.setattr(runner, "grade", grade)
    for run, last_line in [
        (lambda: notebook.check_notebook(str(target), question=3), "running Q3's public checks (ngram)..."),
        (lambda: notebook.check_notebook(str(target)), "running the public checks of ngram..."),
        (lambda: cli.main(["check", str(target), "--question", "3", "--question", "1"]),
         "running the public checks of Q1, Q3 (ngram)..."),
        (lambda: cli.main(["check", str(target)]), "running the public checks of ngram..."),
    ]:
        capsys.readouterr()
        assert run() in (None, 0)
        assert printed[-1].rstrip().splitlines()[-1] == last_line
