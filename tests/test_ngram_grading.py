"""The staff solution notebook gets every point; the untouched starter gets none, without a crash."""
import pytest

from autograder.authoring import assignments, build
from autograder.grading import runner

NGRAM = assignments.get("ngram")


@pytest.fixture(scope="module")
def solution_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.write_solution_notebooks(folder, [NGRAM])
    return runner.grade(folder / "ngram.ipynb", NGRAM)


def test_staff_solution_passes_every_check(solution_report):
    failed = {r.name: r.output for r in solution_report.results if not r.passed}
    assert failed == {}
    assert solution_report.score == solution_report.max_score + sum(r.max_score for r in solution_report.results if r.extra)
    assert {r.question for r in solution_report.results} == set(NGRAM.questions)


def test_perplexity_checks_report_the_rule_and_no_figure_of_the_students(solution_report):
    """The held-out verdicts are fixed words (issue 30): the rule, never the student's perplexity."""
    import re
    outputs = {r.name: r.output for r in solution_report.results}
    assert "within the threshold" in outputs["shakespeare_heldout"]
    assert "Bayes-optimal" in outputs["synthetic_floor"]
    for name in ("shakespeare_heldout", "synthetic_floor"):
        assert not re.search(r"\d\.\d{3}", outputs[name]), outputs[name]


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(NGRAM.starter_path, NGRAM)
    assert report.score == 0
    assert len(report.results) == len(NGRAM.checks())
    assert all("not implemented yet" in r.output for r in report.results)
    assert not any("grader could not finish" in r.output for r in report.results)


def test_every_question_has_public_and_hidden_checks():
    checks = [fn.lmgrade_check for fn in NGRAM.checks()]
    graded = {c.question for c in checks if not c.extra}
    assert graded == {q for q in NGRAM.questions if q != "7"}
    assert {c.question for c in checks if c.public} >= graded
    assert all(c.points > 0 for c in checks)


def test_every_check_names_what_it_grades():
    """`uses` on every check (blame, banned built-ins); `needs` only names other questions' functions."""
    checks = [fn.lmgrade_check for fn in NGRAM.checks()]
    owner = {name: c.question for c in checks for name in c.uses if len(set(d.question for d in checks if name in d.uses)) == 1}
    assert all(c.uses for c in checks)
    assert all(name in {u for d in checks for u in d.uses} for c in checks for name in c.needs)
    assert owner["count_ngrams"] == "2" and owner["generate"] == "5"


def test_a_bug_in_one_check_costs_only_that_check(tmp_path, monkeypatch, capsys):
    from autograder.checking.checks import check
    from tests.helpers import solution_text

    @check(1, 1, "a check with a bug")
    def broken(t):
        return {}["missing"]

    real = NGRAM.checks
    monkeypatch.setattr(NGRAM, "checks", lambda public_only=False: [broken] + real(public_only))
    path = tmp_path / "solution.py"
    path.write_text(solution_text())
    report = runner.grade(path, NGRAM, questions={"1"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert list(failed) == ["broken"] and "not your fault" in failed["broken"]
    assert len(report.results) > 1
    assert "KeyError" in capsys.readouterr().err  # the traceback is for staff, on stderr
