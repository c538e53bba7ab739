"""`lmgrade` as TAs and students run it: exit codes, the table, and Gradescope results.json."""
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from autograder import assignments, cli, runner
from tests.helpers import solution_text

SCHEMA = json.loads((Path(__file__).parent / "data" / "gradescope_results.schema.json").read_text())


def lmgrade(*args, **kwargs):
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], capture_output=True, text=True,
                          timeout=300, **kwargs)


@pytest.fixture
def solution_py(tmp_path):
    path = tmp_path / "alice_ngram.py"
    path.write_text(solution_text())
    return path


def test_grade_writes_valid_gradescope_results(tmp_path, solution_py):
    out = tmp_path / "results" / "results.json"
    proc = lmgrade("grade", solution_py, "--assignment", "ngram", "--device", "cpu", "--question", "1",
                   "--question", "4", "--json", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    questions = {t["number"] for t in doc["tests"]}
    assert questions == {"1", "4"}
    assert doc["score"] == sum(t["max_score"] for t in doc["tests"]) > 0
    assert {t["visibility"] for t in doc["tests"]} == {"visible", "after_published"}
    assert "Tokens and vocabulary" in proc.stdout and "total" in proc.stdout


def test_starter_scores_zero_and_exit_code_is_still_zero(tmp_path):
    out = tmp_path / "results.json"
    proc = lmgrade("grade", assignments.get("ngram").starter_path, "--assignment", "ngram", "--device", "cpu",
                   "--question", "1", "--question", "2", "--json", out)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["score"] == 0 and all(t["status"] == "failed" for t in doc["tests"])
    assert all("not implemented yet" in t["output"] for t in doc["tests"])


def test_public_check_runs_only_public_checks(tmp_path):
    notebook = tmp_path / "my homework.ipynb"  # the assignment comes from the notebook's metadata
    notebook.write_text(assignments.get("ngram").starter_path.read_text())
    proc = lmgrade("check", notebook)
    assert proc.returncode == 0, proc.stderr
    assert "public checks only" in proc.stdout
    report = runner.grade(notebook, assignments.get("ngram"), public_only=True)
    assert report.results and all(r.public for r in report.results)


@pytest.mark.parametrize("args, message", [
    (["grade", "missing.ipynb", "--assignment", "ngram"], "no such submission"),
    (["grade", "x.py", "--assignment", "rnn_lm"], "not written yet"),
    (["grade", "x.py", "--assignment", "ngram", "--device", "cuda"], "no CUDA device"),
    (["check", "missing.ipynb"], "does not exist"),
])
def test_wrong_arguments_exit_2_with_a_message(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.py").write_text("")
    if "cuda" in args:
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("a CUDA device is present")
    assert cli.main(args) == 2
    assert message in capsys.readouterr().err


def test_unknown_assignment_is_an_argument_error():
    proc = lmgrade("grade", "x.py", "--assignment", "nope")
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_grader_failure_exits_1_and_still_leaves_valid_results(tmp_path, solution_py, monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(runner, "grade", broken)
    out = tmp_path / "results.json"
    assert cli.main(["grade", str(solution_py), "--assignment", "ngram", "--device", "cpu", "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SCHEMA)
    assert doc["score"] == 0 and "disk full" in doc["output"]
    assert "disk full" in capsys.readouterr().err


def test_build_check_passes_on_a_clean_tree():
    proc = lmgrade("build", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
