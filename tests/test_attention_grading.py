"""`attention`: the staff solution gets every point and the starter none; built-in attention is
detected statically and costs exactly the checks of the names that use it."""
import pytest
import torch

from autograder.authoring import assignments, build
from autograder.grading import runner

ATTENTION = assignments.get("attention")


@pytest.fixture(scope="module")
def solution_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.write_solution_notebooks(folder, [ATTENTION])
    return folder / "attention.ipynb"


def test_staff_solution_passes_every_check_without_notes(solution_notebook):
    report = runner.grade(solution_notebook, ATTENTION, device="cpu")
    assert {r.name: r.output for r in report.results if r.output != "Passed."} == {}
    assert report.score == report.max_score == 42
    assert {r.question for r in report.results} == set(ATTENTION.questions)


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(ATTENTION.starter_path, ATTENTION, device="cpu")
    assert report.score == 0
    assert len(report.results) == len(ATTENTION.checks())
    assert all("not implemented yet" in r.output for r in report.results)


def test_every_question_has_public_and_hidden_checks_and_names_what_it_grades():
    checks = [fn.lmgrade_check for fn in ATTENTION.checks()]
    assert {c.question for c in checks if c.public} == set(ATTENTION.questions)
    assert {c.question for c in checks if not c.public} == set(ATTENTION.questions)
    assert all(c.uses for c in checks), "every check names the student code it grades"
    modules = {"MultiHeadAttention", "GroupedQueryAttention"}
    assert all("scaled_dot_product_attention" in c.needs for c in checks if set(c.uses) & modules), \
        "a module check names the earlier function it relies on"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_staff_solution_passes_on_cuda(solution_notebook):
    report = runner.grade(solution_notebook, ATTENTION, device="cuda")
    assert {r.name: r.output for r in report.results if not r.passed} == {}


def test_a_forbidden_use_withholds_only_the_checks_that_grade_it(tmp_path):
    from tests.helpers import solution_text
    text = solution_text("attention").replace(
        "    return j <= i + (T_k - T_q)",
        "    return torch.nn.functional.scaled_dot_product_attention is None or j <= i + (T_k - T_q)")
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, ATTENTION, device="cpu", questions={"3"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert set(failed) == {"public_masks", "causal_mask_hidden"}
    assert all("asks you to write yourself" in out for out in failed.values())


def test_vars_lookup_of_the_builtin_earns_nothing_in_q2(tmp_path):
    """Issue 9's spelling, end to end: the static scan withholds every Q2 point (more spellings: test_forbidden)."""
    from tests.helpers import solution_text
    text = solution_text("attention").replace(
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)\n",
        "    import torch.nn.functional as F\n    if mask is None:\n"
        '        out = vars(F)["scaled_dot_product_attention"](q, k, v)\n'
        "        return out, torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), -1)\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)\n")
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, ATTENTION, device="cpu", questions={"2"})
    assert report.results and report.score == 0
    assert all("Not graded" in r.output for r in report.results)  # `vars` is outside the graded-code subset
