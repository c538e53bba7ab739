"""Nothing the student's code chose reaches a message about held-out data (issue 30, item 5).

A figure computed on held-out text from weights the student's code chose (a perplexity, an exact
match) is an oracle on that text when it is shown: two submissions that differ only in what that
figure would say must get byte-identical feedback, and a failing one the fixed message. The figure
may go to the TA's leaderboard entry (`Context.publish`), never into the feedback text.

Cheap by design: each check's verdict is its own code (`judge_*`), run on a Context whose cached
reference results are given; rnn_lm Q7's figure comes from the grader's own `test_perplexity` on two
small stand-in LSTMs, the others' figures are given directly (each would need a training run).
"""
import math

import numpy as np
import pytest
import torch

from autograder.authoring import assignments
from autograder.checking.checks import Context
from autograder.checking.perplexity import check_distributions
from autograder.errors import CheckFailed


def context_for(assignment_id: str, check_name: str, reference_results: dict) -> Context:
    """A Context of the named hidden check, whose `t.cached` reads `reference_results`."""
    fn = next(f for f in assignments.get(assignment_id).checks() if f.lmgrade_check.name == check_name)
    return Context(student=None, ref=None, spec=fn.lmgrade_check, cache_tag="held-out-messages-test",
                   reference_results=dict(reference_results))


def feedback(ctx: Context, judge, *args) -> tuple[str, list]:
    """What the runner shows the student for this verdict ("Passed." or the failure, then the notes),
    and the leaderboard entries the check published (kept by the runner only when it passed)."""
    try:
        judge(ctx, *args)
        message = "Passed."
    except CheckFailed as exc:
        message = str(exc)
    return "\n".join([message, *ctx.notes]), ctx.published


def assert_no_figure(text: str, *figures: float) -> None:
    for x in figures:
        for shown in (f"{x:.3f}", f"{x:.2f}", f"{x:.1%}", f"{x:.3g}", f"{x:.4g}"):
            assert shown not in text, (shown, text)


# ---- rnn_lm Q7: test-play perplexity of two stand-in LSTMs, scored by the grader's own forward ----------
def stand_in_lstm(vocab_size: int, unigram: np.ndarray, tilt: float) -> dict:
    """A tiny LSTM whose output is (almost) the unigram distribution; `tilt` sharpens or flattens it,
    which moves the held-out perplexity and nothing else."""
    E, H = 4, 8
    g = torch.Generator().manual_seed(0)
    return {"embedding.weight": torch.randn(vocab_size, E, generator=g), "rnn.cell.weight_ih": torch.zeros(4 * H, E),
            "rnn.cell.weight_hh": torch.zeros(4 * H, H), "rnn.cell.bias_ih": torch.zeros(4 * H),
            "rnn.cell.bias_hh": torch.zeros(4 * H), "proj.weight": torch.zeros(vocab_size, H),
            "proj.bias": torch.from_numpy(tilt * np.log(unigram)).float()}


def test_rnn_lm_q7_shows_the_rule_not_the_test_perplexity():
    from assignments.rnn_lm import hidden_checks as rnn
    vocab, train_ids, test_ids = rnn.char_data()
    V = len(vocab)
    unigram = np.bincount(train_ids.numpy(), minlength=V) + 1.0
    unigram /= unigram.sum()
    ppl_a = rnn.test_perplexity(stand_in_lstm(V, unigram, 1.0), test_ids)
    ppl_b = rnn.test_perplexity(stand_in_lstm(V, unigram, 0.8), test_ids)
    assert ppl_a < ppl_b < ppl_a * 1.05  # two models, two figures, one side of the threshold
    what = "train_lm(...)"
    passing = [feedback(context_for("rnn_lm", "shakespeare_lstm", {"q7-shakespeare": ppl_a}), rnn.judge_q7, what, p, V)
               for p in (ppl_a, ppl_b)]
    assert passing[0][0] == passing[1][0]
    assert passing[0][0].startswith("Passed.") and "within the threshold" in passing[0][0]
    assert_no_figure(passing[0][0], ppl_a, ppl_b)
    # the figure reaches only the leaderboard entry (TA-only unless staff build with --leaderboard)
    assert [e["value"] for _, published in passing for e in published] == [ppl_a, ppl_b]
    assert all(e["held_out"] for _, published in passing for e in published)
    # a failing model: the fixed message, the same for two figures on the same side
    failing = [feedback(context_for("rnn_lm", "shakespeare_lstm", {"q7-shakespeare": ppl_a / 1.2}), rnn.judge_q7,
                        what, p, V)[0] for p in (ppl_a, ppl_b)]
    assert failing[0] == failing[1] and "above the threshold" in failing[0]
    assert_no_figure(failing[0], ppl_a, ppl_b, ppl_a / 1.2)


@pytest.mark.parametrize("low, high, words", [(math.inf, 213.7, "training went uphill"),
                                              (math.nan, 93.4, "training went uphill"),
                                              (3.13, 4.27, "does not trust it")])
def test_rnn_lm_q7_refusals_are_fixed_text(low, high, words):
    from assignments.rnn_lm import hidden_checks as rnn
    shown = [feedback(context_for("rnn_lm", "shakespeare_lstm", {"q7-shakespeare": 6.9}), rnn.judge_q7, "w", p, 43)
             for p in (low, high)]
    assert shown[0][0] == shown[1][0] and words in shown[0][0]
    assert shown[0][1] == shown[1][1] == []  # a failed verdict publishes nothing
    assert_no_figure(shown[0][0], high, 6.9)


# ---- rnn_lm Q8: exact match on held-out pairs -------------------------------------------------------
def test_rnn_lm_q8_shows_the_rule_not_the_exact_match():
    from assignments.rnn_lm import hidden_checks as rnn
    shown = [feedback(context_for("rnn_lm", "seq2seq_reversal", {}), rnn.judge_q8, a) for a in (0.912, 0.978)]
    assert shown[0][0] == shown[1][0] and shown[0][0].startswith("Passed.") and ": reached." in shown[0][0]
    assert [e["value"] for _, published in shown for e in published] == [0.912, 0.978]
    failing = [feedback(context_for("rnn_lm", "seq2seq_reversal", {}), rnn.judge_q8, a)[0] for a in (0.12, 0.594)]
    assert failing[0] == failing[1] and ": below." in failing[0] and "60% needed" in failing[0]
    for text in (shown[0][0], failing[0]):
        assert_no_figure(text, 0.912, 0.978, 0.12, 0.594)


# ---- transformer Q6 (test plays), the synthetic check, Q8 (sorting) --------------------------------
def test_transformer_q6_shows_the_rule_not_the_test_perplexity():
    from assignments.transformer import hidden_checks as tr
    results = {"shakespeare": 10.33}
    shown = [feedback(context_for("transformer", "shakespeare_perplexity", results), tr.judge_shakespeare, "w", p, 65)
             for p in (10.21, 10.87)]
    assert shown[0][0] == shown[1][0] and "within the threshold" in shown[0][0]
    assert [e["value"] for _, published in shown for e in published] == [10.21, 10.87]
    for pair, words in (((11.2, 12.5), "above the threshold"), ((math.inf, 311.9), "diverged"),
                        ((5.13, 6.87), "does not trust it")):
        failing = [feedback(context_for("transformer", "shakespeare_perplexity", results), tr.judge_shakespeare, "w",
                            p, 65)[0] for p in pair]
        assert failing[0] == failing[1] and words in failing[0]
        assert_no_figure(failing[0], *pair, 10.33)
    assert_no_figure(shown[0][0], 10.21, 10.87, 10.33)


def test_transformer_synthetic_shows_neither_the_perplexity_nor_its_floor():
    from assignments.transformer import hidden_checks as tr
    results = {"synthetic": 1.02}  # the reference's ratio to the floor
    # two submissions (and two secret draws, so two floors) on the same side of each rule
    shown = [feedback(context_for("transformer", "synthetic_perplexity", results), tr.judge_synthetic, p, f)[0]
             for p, f in ((4.05, 3.98), (4.21, 4.11))]
    assert shown[0] == shown[1] and "within the threshold" in shown[0]
    below = [feedback(context_for("transformer", "synthetic_perplexity", results), tr.judge_synthetic, p, f)[0]
             for p, f in ((3.5, 3.98), (3.0, 4.11))]
    assert below[0] == below[1] and "entropy floor" in below[0]
    above = [feedback(context_for("transformer", "synthetic_perplexity", results), tr.judge_synthetic, p, f)[0]
             for p, f in ((4.6, 3.98), (5.2, 4.11))]
    assert above[0] == above[1] and "above the threshold" in above[0]
    for text in (shown[0], below[0], above[0]):
        assert_no_figure(text, 4.05, 3.98, 4.21, 4.11, 3.5, 3.0, 4.6, 5.2)


def test_transformer_q8_shows_the_rule_not_the_sorting_accuracy():
    from assignments.transformer import hidden_checks as tr
    results = {"sort": 0.999}
    shown = [feedback(context_for("transformer", "seq2seq_sorting", results), tr.judge_sorting, "w", a)
             for a in (0.961, 0.997)]
    assert shown[0][0] == shown[1][0] and ": reached." in shown[0][0]
    assert [e["value"] for _, published in shown for e in published] == [0.961, 0.997]
    failing = [feedback(context_for("transformer", "seq2seq_sorting", results), tr.judge_sorting, "w", a)[0]
               for a in (0.2, 0.93)]
    assert failing[0] == failing[1] and ": below." in failing[0]
    for text in (shown[0][0], failing[0]):
        assert_no_figure(text, 0.961, 0.997, 0.2, 0.93, 0.999, 0.949)


# ---- the shared helper: distributions after held-out contexts -------------------------------------
def test_bad_held_out_distributions_get_one_fixed_message():
    contexts = [("a", "b"), ("c", "d")]
    good = np.full((2, 4), 0.25)
    assert np.array_equal(check_distributions(good, contexts, 4, "m", name_contexts=False), good)
    bad_rows = [good * np.array([[1.0], [1.0 + 1e-4]]), good * np.array([[1.0], [1.0 + 7e-4]]),
                np.where(np.eye(2, 4, dtype=bool), -0.1, good), np.full((3, 4), 0.25), "not an array",
                np.where(np.eye(2, 4, dtype=bool), np.nan, good)]
    messages = set()
    for rows in bad_rows:
        with pytest.raises(CheckFailed) as shown:
            check_distributions(rows, contexts, 4, "m", name_contexts=False)
        messages.add(str(shown.value))
    assert len(messages) == 1
    (message,) = messages
    assert "sum to 1" in message and "('c', 'd')" not in message and "1.0001" not in message
    # validation contexts (the student's own data) keep the detail
    with pytest.raises(CheckFailed, match=r"\('c', 'd'\).*1\.000100000"):
        check_distributions(bad_rows[0], contexts, 4, "m")


# ---- the runner: a crash after seal() (its exit code, its CPU seconds) is the student's code's choice ---
@pytest.mark.parametrize("sealed", [True, False])
def test_a_crash_after_seal_gets_one_fixed_message(sealed):
    import types

    from autograder.checking.remote import InProcessChannel, Student, StudentCrash
    from autograder.grading import runner
    from autograder.sandbox.lifecycle import WorkerFailure
    from autograder.sandbox.limits import Limits

    class NoWorker:
        def request(self, *args):
            raise WorkerFailure("unavailable", "no worker in this test")

    spec = next(f for f in assignments.get("ngram").checks()
                if f.lmgrade_check.name == "shakespeare_heldout").lmgrade_check
    outputs = []
    for code in (3, 201):  # two exit codes, as a student's os._exit could choose after reading a context
        def crashing_check(t, code=code):
            if sealed:
                t.student.seal()
            raise StudentCrash(f"prob(w, context) ended the student's process: exit code {code}. Other questions "
                               "are graded in a fresh process.")
        crashing_check.lmgrade_check = spec
        student = Student(InProcessChannel(types.ModuleType("submission")))
        result = runner._run_check(crashing_check, student, NoWorker(), Limits(), {"ref": None})
        assert not result.passed
        outputs.append(result.output)
    if sealed:
        assert outputs[0] == outputs[1] and runner.SEALED_CRASH in outputs[0] and "exit code" not in outputs[0]
    else:  # before held-out text was shown, the crash's details help the student and are shown
        assert "exit code 3" in outputs[0] and "exit code 201" in outputs[1]



SEALED_SPIN_CHECKS = '''
from autograder.checking.checks import check


@check(1, 1, "after the student sees held-out text", uses=("leak",))
def after(t):
    t.student.seal()
    t.student.leak("HELDOUT words")
'''


def test_through_a_real_worker_a_crash_after_seal_gets_the_fixed_message(tmp_path, monkeypatch):
    """The whole path, with the one crash graded code can still cause (ending the process is refused
    earlier: `import os`/`sys` are outside the subset, SystemExit is an error): running out of time, whose
    details (CPU seconds used, wall-clock time) the code could modulate."""
    from autograder.authoring.assignments import Assignment
    from autograder.grading import runner
    from autograder.sandbox.limits import Limits
    monkeypatch.setenv("LMGRADE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "root" / "assignments" / "toy"
    folder.mkdir(parents=True)
    (folder / "meta.toml").write_text('title = "toy"\n[questions]\n1 = "leak"\n')
    (folder / "public_checks.py").write_text("")
    (folder / "hidden_checks.py").write_text(SEALED_SPIN_CHECKS)
    (tmp_path / "root" / "solutions").mkdir()
    (tmp_path / "root" / "solutions" / "toy.py").write_text("")
    spinner = tmp_path / "spinner.py"
    spinner.write_text("def leak(x):\n    n = 0\n    while True:\n        n += len(x)\n")
    (after,) = runner.grade(spinner, Assignment("toy", tmp_path / "root"),
                            limits=Limits(call_timeout=1, load_timeout=20)).results
    assert not after.passed and after.output.startswith(runner.SEALED_CRASH), after.output
    assert "CPU" not in after.output and "wall-clock" not in after.output
