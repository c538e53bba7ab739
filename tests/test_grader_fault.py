"""A grading that fails on the grader's side is never recorded as the student's score: a worker
that cannot start makes `runner.grade` raise GraderFault; `lmgrade` exits 4 without writing a
result, a batch records an error, and the notebook prints no table."""
from __future__ import annotations

import json

import pytest

from autograder import cli
from autograder.authoring import assignments
from autograder.errors import GraderFault
from autograder.grading import batch, runner
from autograder.sandbox import lifecycle
from autograder.sandbox.lifecycle import WorkerFailure
from tests.helpers import solution_text


@pytest.fixture
def solution(tmp_path):
    path = tmp_path / "ngram.py"
    path.write_text(solution_text("ngram"))
    return path


def _no_worker(monkeypatch):
    def refuse(self, *args, **kwargs):
        raise WorkerFailure("unavailable", "the worker process could not start: an unreadable interpreter")
    monkeypatch.setattr(lifecycle.Sandbox, "_spawn", refuse)
    monkeypatch.setattr(lifecycle.Sandbox, "_spawn_portable", refuse)


def test_a_worker_that_cannot_start_is_a_grader_fault_not_zero_points(solution, monkeypatch):
    _no_worker(monkeypatch)
    with pytest.raises(GraderFault, match="could not start: an unreadable interpreter"):
        runner.grade(solution, assignments.get("ngram"), questions={"1"})


def test_a_check_that_crashes_stays_a_check_failure_a_lying_worker_cannot_turn_into_a_fault(solution, monkeypatch):
    """A check can crash on a value a hostile worker made up (test_hostile's patched encoder), so a
    crash is that check's failure with a 'not your fault' note, never a way to have no score at all."""
    ngram = assignments.get("ngram")
    checks = [fn for fn in ngram.checks() if fn.lmgrade_check.question == "1"]

    def broken(t):
        raise KeyError("a bug in the check itself")

    broken.lmgrade_check = checks[0].lmgrade_check
    monkeypatch.setattr(type(ngram), "checks", lambda self, public_only=False: [broken])
    report = runner.grade(solution, ngram, questions={"1"})
    assert [r.passed for r in report.results] == [False]
    assert "could not finish this check" in report.results[0].output


def test_student_caused_restarts_stay_the_students():
    """Only the grader's own failures are faults: a submission that kills its worker again and again
    ('restarted too many times') is the student's and keeps costing its checks."""
    from autograder.checking.remote import Student

    class Dead:
        def request(self, message, arrays, timeout):
            raise WorkerFailure("unavailable", "the student's process was restarted too many times")

    student = Student(Dead())
    with pytest.raises(Exception):
        student.count_ngrams([["a"]], 1)
    assert student.grader_faults == []


def test_lmgrade_grade_exits_4_and_writes_no_result(solution, tmp_path, monkeypatch, capsys):
    _no_worker(monkeypatch)
    out = tmp_path / "results.json"
    code = cli.main(["grade", str(solution), "--assignment", "ngram", "--question", "1", "--json", str(out),
                     "--allow-unconfined"])
    assert code == cli.GRADER_FAULT and not out.exists()
    assert "not the submission" in capsys.readouterr().err


def test_check_notebook_prints_no_score_table(solution, monkeypatch, capsys):
    from autograder.student import notebook
    _no_worker(monkeypatch)
    notebook.check_notebook(str(solution), assignment="ngram", question=1)
    printed = capsys.readouterr().out
    assert "this is not about your code" in printed and "total" not in printed


def test_a_batch_records_an_error_not_a_grade(solution, tmp_path):
    """The batch's grader processes are other processes: there the worker cannot run (a worker
    python that does not exist, as a broken venv would give). Whether the grader refuses before
    starting it or the start fails, the submission's record is an error, with no row of points."""
    subs = tmp_path / "subs"
    subs.mkdir()
    import shutil
    shutil.copy(solution, subs / "alice.py")
    from autograder.sandbox.limits import Limits
    broken = Limits(worker_python=str(tmp_path / "no-such-python"))
    result = batch.run([subs], assignments.get("ngram"), tmp_path / "out", questions=["1"], limits=broken,
                       progress=False)
    (record,) = result.records.values()
    assert record["status"] == "error" and ("GraderFault" in record["error"] or "Refusing" in record["error"]), record
    assert result.graded == 0
