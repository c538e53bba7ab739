"""`transformer`: the staff solution gets every point and the starter none; every question has
public and hidden checks; built-in Transformer pieces cost exactly the checks that grade them."""
import pytest
import torch

from autograder.authoring import assignments, build
from autograder.grading import runner

TRANSFORMER = assignments.get("transformer")


@pytest.fixture(scope="module")
def solution_notebook(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solutions")
    build.write_solution_notebooks(folder, [TRANSFORMER])
    return folder / "transformer.ipynb"


def test_staff_solution_passes_every_check(solution_notebook):
    report = runner.grade(solution_notebook, TRANSFORMER, device="cpu")
    assert {r.name: r.output for r in report.results if not r.passed} == {}
    assert report.score == report.max_score
    assert {r.question for r in report.results} == set(TRANSFORMER.questions)
    board = {e["name"] for e in report.leaderboard}  # both trained models, accepted, on the leaderboard
    assert board == {"transformer Q6: test perplexity per character", "transformer Q8: sorting exact match"}


def test_untouched_starter_scores_zero_with_a_message_per_check():
    report = runner.grade(TRANSFORMER.starter_path, TRANSFORMER, device="cpu")
    assert report.score == 0
    assert len(report.results) == len(TRANSFORMER.checks())
    assert all("not implemented yet" in r.output for r in report.results), \
        [(r.name, r.output[:200]) for r in report.results if "not implemented yet" not in r.output]


def test_every_question_has_public_and_hidden_checks_that_name_their_code():
    checks = [fn.lmgrade_check for fn in TRANSFORMER.checks()]
    assert {c.question for c in checks if c.public} == set(TRANSFORMER.questions)
    assert {c.question for c in checks if not c.public} == set(TRANSFORMER.questions)
    assert all(c.uses for c in checks), "every check names the student code it grades"


def test_builtin_layer_norm_in_the_block_costs_the_block_checks_not_q1(tmp_path):
    from tests.helpers import solution_text
    text = solution_text("transformer").replace(
        "        self.norm1 = LayerNorm(d_model, bias=bias)\n        self.attn",
        "        self.norm1 = nn.LayerNorm(d_model, bias=bias)\n        self.attn")
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, TRANSFORMER, device="cpu", questions={"1", "3"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert set(failed) == {"public_block", "block_builtin", "block_causal", "block_gradients"}
    assert all("asks you to write yourself" in out for out in failed.values())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_staff_solution_passes_on_cuda(solution_notebook):
    report = runner.grade(solution_notebook, TRANSFORMER, device="cuda")
    assert {r.name: r.output for r in report.results if not r.passed} == {}


def test_shakespeare_scores_returned_weights_itself_and_flags_implausibly_good_ones():
    """Only training characters cross; a perplexity far below the reference's is not trusted."""
    import numpy as np

    from tests.helpers import run_check_recording, staff_module
    submission = staff_module("transformer")
    staff_train = submission.train_lm

    def untrained(train_ids, config, settings, init_state=None):  # honest first steps, then the start untouched
        if settings["steps"] <= 2:
            return staff_train(train_ids, config, settings, init_state)
        return {k: v.clone() for k, v in init_state.items()}, [0.0] * settings["steps"]

    submission.train_lm = untrained
    profile = {"shakespeare-start": {"blocks.0.mlp.fc.weight": 0.57}}
    error, sent = run_check_recording("transformer", submission, "shakespeare_perplexity", {"shakespeare": 5.0, **profile})
    assert "perplexity" in str(error) and "does not trust" not in str(error)  # untrained: above the threshold
    error, _ = run_check_recording("transformer", submission, "shakespeare_perplexity", {"shakespeare": 1000.0, **profile})
    assert "does not trust" in str(error)  # far below a (made-up) reference of 1000
    check = next(fn for fn in TRANSFORMER.checks() if fn.lmgrade_check.name == "shakespeare_perplexity")
    _, test_ids = check.__globals__["shakespeare_ids"]()  # the grader's own split
    probe = np.asarray(test_ids[:200], dtype=np.int64).tobytes()
    assert not any(probe in np.ascontiguousarray(a).astype(np.int64).tobytes() for a in sent if a.size >= 200)



def failure_of(replacements, check_name: str) -> str:
    """The message one check gives the staff solution with `replacements`, run in this process ("" if it passes)."""
    from autograder.authoring import build
    from autograder.checking.checks import Context, seed_everything
    from autograder.errors import CheckFailed
    from autograder.checking.remote import InProcessChannel, Student
    from tests.helpers import edited_solution
    text = edited_solution("transformer", replacements)
    student = Student(InProcessChannel(build.module_from_text("lmgrade_test_transformer_message", text)))
    fn = next(fn for fn in TRANSFORMER.checks() if fn.lmgrade_check.name == check_name)
    ctx = Context(student=student, ref=TRANSFORMER.reference(), spec=fn.lmgrade_check,
                  recording={} if fn.lmgrade_check.public else None)
    seed_everything(ctx.seed)
    try:
        fn(ctx)
    except CheckFailed as exc:
        return str(exc)
    return ""


RMS_RETURN = "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight"


def test_a_float32_forward_is_named_float32_not_a_cut_graph():
    """RMSNorm upcast to float32 (as LLaMA's reference code does) has right gradients: the message must say float32."""
    upcast = [(RMS_RETURN, "        h = x.float()\n        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)\n"
                           "        return h.type_as(x) * self.weight")]
    message = failure_of(upcast, "norm_gradients")
    assert "float32" in message and ".detach()" not in message, message
    assert "float32" in failure_of(upcast, "public_norms")


def test_training_checks_blame_a_wrong_schedule_or_optimizer_step_not_the_loop():
    """A correct train_lm with a wrong lr_at (or adamw_step) is told to fix that piece first, publicly and hidden."""
    warmup = [("        return max_lr * (step + 1) / warmup_steps", "        return max_lr * step / warmup_steps")]
    for check in ("public_train_one_step", "train_exact_steps", "public_seq2seq_train", "seq2seq_train_steps"):
        message = failure_of(warmup, check)
        assert "lr_at (Q5)" in message and "loop may well be right" in message, (check, message)
    no_decay = [("    param = param - lr * weight_decay * param - lr * m_hat", "    param = param - lr * m_hat")]
    assert "adamw_step (Q5)" in failure_of(no_decay, "public_train_one_step")


def test_a_loss_by_log_of_softmax_is_told_why_it_is_inf():
    two_steps = [("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n        optimizer.zero_grad()\n"
                  "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
                  "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses",
                  "        probs = torch.softmax(logits, dim=-1)\n"
                  "        loss = -torch.log(probs.gather(-1, y[..., None])).mean()\n        optimizer.zero_grad()\n"
                  "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
                  "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses")]
    for check in ("public_train_one_step", "train_exact_steps"):
        message = failure_of(two_steps, check)
        assert "log_softmax" in message and "inf" in message, (check, message)
