"""backprop: the staff solution notebook gets every point, the untouched starter none (without a
crash), and the checks are laid out as the README says."""
import pytest

from autograder.authoring import assignments, build
from autograder.grading import runner

BACKPROP = assignments.get("backprop")


@pytest.fixture(scope="module")
def solution_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.write_solution_notebooks(folder, [BACKPROP])
    return runner.grade(folder / "backprop.ipynb", BACKPROP)


def test_staff_solution_passes_every_check(solution_report):
    failed = {r.name: r.output for r in solution_report.results if not r.passed}
    assert failed == {}
    assert solution_report.score == solution_report.max_score
    assert {r.question for r in solution_report.results} == set(BACKPROP.questions)


def test_training_check_reports_perplexity_and_threshold(solution_report):
    output = next(r.output for r in solution_report.results if r.name == "shakespeare_ffnn")
    assert "perplexity" in output and "threshold" in output


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(BACKPROP.starter_path, BACKPROP)
    assert report.score == 0
    assert len(report.results) == len(BACKPROP.checks())
    assert all("not implemented yet" in r.output for r in report.results)
    assert not any("grader could not finish" in r.output for r in report.results)


def test_every_question_has_public_and_hidden_checks():
    checks = [fn.lmgrade_check for fn in BACKPROP.checks()]
    assert {c.question for c in checks if c.public} == set(BACKPROP.questions)
    assert {c.question for c in checks if not c.public} == set(BACKPROP.questions)
    assert all(c.points > 0 for c in checks)
    assert sum(c.points for c in checks) == 40


def test_every_check_declares_what_it_grades_and_what_it_needs():
    """`uses` names defined functions of the check's own question; `needs` only earlier ones (for blame)."""
    import ast
    defined = {node.name for node in ast.parse(BACKPROP.reference_path.read_text()).body
               if isinstance(node, ast.FunctionDef)}
    specs = [fn.lmgrade_check for fn in BACKPROP.checks()]
    question_of = {}
    for spec in specs:
        assert spec.uses and set(spec.uses) <= defined, spec.name
        for name in spec.uses:
            question_of.setdefault(name, spec.question)
    for spec in specs:
        assert set(spec.needs) <= defined, spec.name
        assert all(int(question_of[name]) < int(spec.question) for name in spec.needs), spec.name


def test_hidden_small_case_matches_the_reference():
    """The numbers written out in hidden_checks.py are the reference's (and torch's) for that model."""
    import numpy as np

    from autograder.authoring.assignments import load_module
    hidden = load_module(BACKPROP.dir / "hidden_checks.py", "lmgrade_checks_backprop_hidden")
    ref = BACKPROP.reference()
    loss, grads = ref.ffnn_loss_and_grads(hidden.SMALL_PARAMS, hidden.SMALL_CONTEXTS, hidden.SMALL_TARGETS)
    _, torch_loss, torch_grads = hidden.torch_ffnn(hidden.SMALL_PARAMS, hidden.SMALL_CONTEXTS, hidden.SMALL_TARGETS)
    assert loss == pytest.approx(hidden.SMALL_LOSS, rel=1e-14) and torch_loss == pytest.approx(loss, rel=1e-14)
    for name in hidden.PARAM_NAMES:
        np.testing.assert_allclose(grads[name], hidden.SMALL_GRADS[name], rtol=1e-13, atol=1e-16)
        np.testing.assert_allclose(torch_grads[name], hidden.SMALL_GRADS[name], rtol=1e-13, atol=1e-16)


def test_word_vocab_and_ids_encode_lines_with_end_markers_and_unk():
    from autograder.sandbox.support import word_ids, word_vocab
    lines = ["The king, the KING!", "a king's crown", "the end"]
    vocab = word_vocab(lines, 5)  # </s>, <unk>, then by count (the: 3, king: 2), ties by the word
    assert vocab == ["</s>", "<unk>", "the", "king", "!"]
    assert word_ids(lines, vocab).tolist() == [2, 3, 1, 2, 3, 4, 0, 1, 1, 1, 0, 2, 1, 0]
    assert word_ids([], vocab).dtype.name == "int64"


def test_the_function_handed_to_a_gradient_checker_carries_no_gradient():
    import numpy as np

    from autograder.sandbox.support import FACTORIES, SmoothFunction, smooth_function
    f, mine = smooth_function(3, (2, 4)), SmoothFunction(3, (2, 4))
    x = np.random.default_rng(1).normal(size=(2, 4))
    assert f(x) == mine(x)  # the same numbers on both sides, so the grader can difference its own copy
    assert not hasattr(f, "grad") and not hasattr(f, "__self__")
    assert "SmoothFunction" not in FACTORIES  # the object with .grad is never made in the worker


def test_shakespeare_check_never_sends_the_test_plays():
    """Only the training ids cross to the worker; the grader scores the returned parameters itself."""
    import numpy as np

    from tests.helpers import run_check_recording, staff_module
    submission = staff_module("backprop")
    submission.train_ffnn = lambda ids, V, **kw: (submission.init_params(V, kw["dim"], kw["hidden"], kw["context"],
                                                                        kw["seed"]), [0.0] * kw["steps"])
    error, sent = run_check_recording("backprop", submission, "shakespeare_ffnn", {"ffnn-shakespeare": 80.0})
    assert "perplexity" in str(error)  # untrained: far above the threshold
    check = next(fn for fn in BACKPROP.checks() if fn.lmgrade_check.name == "shakespeare_ffnn")
    train, test = check.__globals__["shakespeare_ids"]()
    assert any(a.shape == train.shape and np.array_equal(a, train) for a in sent)
    # Far below the reference (here: a reference made 3000, the untrained model is about 2000): flagged.
    error, _ = run_check_recording("backprop", submission, "shakespeare_ffnn", {"ffnn-shakespeare": 3000.0})
    assert "seen the test plays" in str(error)
    probe = test[:200].astype(np.int64).tobytes()
    assert not any(probe in np.ascontiguousarray(a).astype(np.int64).tobytes() for a in sent if a.size >= 200)


def test_test_play_feedback_quotes_no_figure_of_the_students_model():
    """Two models with different perplexities on the test plays hear the same words (issue 30): the
    perplexity of parameters the student chose would answer questions about the held-out plays."""
    from tests.helpers import run_check_recording, staff_module
    messages = []
    for scale in (1.0, 3.0):
        submission = staff_module("backprop")
        submission.train_ffnn = lambda ids, V, scale=scale, submission=submission, **kw: (
            {n: scale * v for n, v in submission.init_params(V, kw["dim"], kw["hidden"], kw["context"], 1).items()},
            [0.0] * kw["steps"])
        error, _ = run_check_recording("backprop", submission, "shakespeare_ffnn", {"ffnn-shakespeare": 80.0})
        messages.append(str(error))
    assert messages[0] == messages[1] and "above it" in messages[0], messages


def test_smooth_function_gradient_is_exact():
    import numpy as np

    from autograder.checking.gradients import finite_difference
    from autograder.sandbox.support import SmoothFunction
    f = SmoothFunction(3, (2, 4))
    x = np.random.default_rng(0).normal(size=(2, 4))
    assert isinstance(f(x), float)
    np.testing.assert_allclose(f.grad(x), finite_difference(f, x), rtol=1e-7, atol=1e-8)
    assert np.abs(f.grad(x)).max() > 0.1
