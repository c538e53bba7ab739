"""check_notebook() finds the running notebook in each front-end and checks what the grader will see."""
import json
import os
import shutil
import sys
import types

import pytest

from autograder import assignments, notebook

STARTER = assignments.get("ngram").starter_path


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    return tmp_path


def test_explicit_path_and_saved_age(folder):
    target = folder / "ngram (1).ipynb"
    shutil.copy(STARTER, target)
    found, line = notebook.locate(str(target), namespace={}, environ={})
    assert found == target and "as saved at" in line and "ago" in line
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
    with pytest.raises(notebook.NotebookNotFound, match="Pass its file name"):
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
    assert "Checked ngram (1).ipynb as saved" in out
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
