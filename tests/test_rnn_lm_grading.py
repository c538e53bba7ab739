"""`rnn_lm`: the staff solution gets every point and the starter none; built-in recurrent modules are
detected statically and cost exactly the checks of the names that use them."""
import pytest
import torch

from autograder.authoring import assignments, build
from autograder.grading import runner
from autograder.sandbox.extract import Cell
from autograder.sandbox.forbidden import tainted_names

RNN_LM = assignments.get("rnn_lm")
PROFILE_Q7 = {"q7-start": {"rnn.cell.weight_hh": 0.67}}  # a made-up profile: the untrained long run keeps it all


@pytest.fixture(scope="module")
def solution_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.write_solution_notebooks(folder, [RNN_LM])
    return folder / "rnn_lm.ipynb"


def test_staff_solution_passes_every_check_without_failures(solution_notebook):
    report = runner.grade(solution_notebook, RNN_LM, device="cpu")
    assert {r.name: r.output for r in report.results if not r.passed} == {}
    assert report.score == report.max_score + sum(r.max_score for r in report.results if r.extra)
    assert {r.question for r in report.results} == set(RNN_LM.questions)
    board = {e["name"]: e for e in report.leaderboard}  # both trained models, accepted, on the leaderboard
    assert set(board) == {"rnn_lm Q7: test perplexity per character", "rnn_lm Q8: reversal exact match"}
    assert board["rnn_lm Q8: reversal exact match"]["order"] == "desc" and all(e["held_out"] for e in board.values())


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(RNN_LM.starter_path, RNN_LM, device="cpu")
    assert report.score == 0
    assert len(report.results) == len(RNN_LM.checks())
    assert all("not implemented yet" in r.output for r in report.results), \
        {r.name: r.output for r in report.results if "not implemented yet" not in r.output}


def test_every_question_has_public_and_hidden_checks():
    checks = [fn.lmgrade_check for fn in RNN_LM.checks()]
    assert {c.question for c in checks if c.public} == set(RNN_LM.questions)
    assert {c.question for c in checks if not c.public} == set(RNN_LM.questions)
    assert all(c.uses for c in checks), "every check names the student code it grades"


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_staff_solution_passes_on_cuda(solution_notebook):
    report = runner.grade(solution_notebook, RNN_LM, device="cuda")
    assert {r.name: r.output for r in report.results if not r.passed} == {}


def cells(*sources):
    return [Cell(index=i, number=i + 1, source=s) for i, s in enumerate(sources)]


def test_builtin_recurrent_modules_are_found_through_helpers_and_spellings():
    found = tainted_names(cells(
        "from torch import nn\nclass RNNLayer(nn.Module):\n    def __init__(self, d, H):\n"
        "        super().__init__()\n        self.inner = nn.RNN(d, H, batch_first=True)",
        "import torch\ndef step(x, h, w):\n    return torch._VF.rnn_tanh_cell(x, h, *w)",
        "def uses_step(x):\n    return step(x, x, ())",
        "import torch\ndef sneaky(x):\n    return getattr(torch, 'lstm_cell')(x)",
        "from torch.nn import LSTMCell as Cell",
        "class LSTMCell:\n    def forward(self, x):\n        return x"), RNN_LM.forbidden)
    assert set(found) == {"RNNLayer", "step", "uses_step", "sneaky", "Cell"}


def test_a_forbidden_use_withholds_only_the_checks_that_grade_it(tmp_path):
    from tests.helpers import edited_solution
    text = edited_solution("rnn_lm", [(
        "        return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)",
        "        return torch.rnn_tanh_cell(x, h, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)")])
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, RNN_LM, device="cpu", questions={"1"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert set(failed) == {"public_rnn", "rnn_cell_hidden", "rnn_layer_hidden", "rnn_gradients"}
    assert all("asks you to write yourself" in out for out in failed.values())


def test_q7_scores_returned_weights_itself_and_flags_implausibly_good_ones():
    """Only training characters cross; a perplexity far below the reference's is not trusted."""
    import numpy as np

    from tests.helpers import run_check_recording, staff_module
    submission = staff_module("rnn_lm")
    staff_train = submission.train_lm
    submission.train_lm = lambda model, stream, **kw: (staff_train(model, stream, **kw) if kw["steps"] <= 2
                                                       else [0.0] * kw["steps"])  # honest first steps, then untrained
    error, sent = run_check_recording("rnn_lm", submission, "shakespeare_lstm", {"q7-shakespeare": 7.0, **PROFILE_Q7})
    assert "perplexity" in str(error) and "does not trust" not in str(error)  # untrained: above the threshold
    error, _ = run_check_recording("rnn_lm", submission, "shakespeare_lstm", {"q7-shakespeare": 1000.0, **PROFILE_Q7})
    assert "does not trust" in str(error)  # far below a (made-up) reference of 1000
    check = next(fn for fn in RNN_LM.checks() if fn.lmgrade_check.name == "shakespeare_lstm")
    _, _, test_ids = check.__globals__["char_data"]()  # the grader's own split
    probe = np.asarray(test_ids[:200], dtype=np.int64).tobytes()
    assert not any(probe in np.ascontiguousarray(a).astype(np.int64).tobytes() for a in sent if a.size >= 200)

