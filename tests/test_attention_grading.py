"""`attention`: the staff solution gets every point and the starter none; built-in attention is
detected statically and costs exactly the checks of the names that use it."""
import pytest
import torch

from autograder import assignments, build, runner
from autograder.extract import Cell
from autograder.forbidden import tainted_names

ATTENTION = assignments.get("attention")


@pytest.fixture(scope="module")
def solution_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.build(solutions_dir=folder, assignments=[ATTENTION])
    return folder / "attention.ipynb"


def test_staff_solution_passes_every_check_without_notes(solution_notebook):
    report = runner.grade(solution_notebook, ATTENTION, device="cpu")
    assert {r.name: r.output for r in report.results if r.output != "Passed."} == {}
    assert report.score == report.max_score == 40
    assert {r.question for r in report.results} == set(ATTENTION.questions)


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(ATTENTION.starter_path, ATTENTION, device="cpu")
    assert report.score == 0
    assert len(report.results) == len(ATTENTION.checks())
    assert all("not implemented yet" in r.output for r in report.results)


def test_every_question_with_code_has_public_and_hidden_checks():
    checks = [fn.lmgrade_check for fn in ATTENTION.checks()]
    with_code = set(ATTENTION.questions) - {"7"}  # Q7 grades the Q4-Q6 code on other devices
    assert {c.question for c in checks if c.public} == with_code
    assert {c.question for c in checks if not c.public} == set(ATTENTION.questions)
    assert all(c.uses for c in checks), "every check names the student code it grades"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_staff_solution_passes_on_cuda(solution_notebook):
    report = runner.grade(solution_notebook, ATTENTION, device="cuda")
    assert {r.name: r.output for r in report.results if not r.passed} == {}


def cells(*sources):
    return [Cell(index=i, number=i + 1, source=s) for i, s in enumerate(sources)]


BANNED = ATTENTION.forbidden


def test_attribute_import_and_getattr_uses_are_found_and_propagate_through_helpers():
    found = tainted_names(cells(
        "import torch.nn.functional as F\ndef attend(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v)",
        "class MHA:\n    def forward(self, x):\n        return attend(x, x, x)",
        "from torch.nn import MultiheadAttention as M",
        "import torch\ndef sneaky(x):\n    return getattr(torch.nn.functional, 'scaled_dot_product_attention')(x, x, x)",
        "def fine(x):\n    return x"), BANNED)
    assert set(found) == {"attend", "MHA", "M", "sneaky"}
    assert str(found["MHA"][0]) == "`scaled_dot_product_attention` (graded cell 1, line 3)"


def test_own_function_of_the_same_name_and_mentions_in_text_are_not_uses():
    found = tainted_names(cells(
        'def scaled_dot_product_attention(q, k, v, mask=None):\n'
        '    """Unlike F.scaled_dot_product_attention, written by hand."""\n    return q',
        "def mha(x):\n    print('not nn.MultiheadAttention')\n    return scaled_dot_product_attention(x, x, x)"), BANNED)
    assert found == {}


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
