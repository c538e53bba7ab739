"""Every held-out draw includes the grader's secret (autograder/checking/held_out.py, `Context.secret_seed`).

The worker knows its own code (so the submission's seed), every check's name (so `seed_for`), the
public files and the engine's code. None of that gives a held-out draw: the secret also hashes the
hidden checks and the reference, which are never shipped. Two submissions draw differently; one
submission draws the same on every run, in every process.
"""
import ast
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from autograder.authoring import assignments
from autograder.checking.checks import CheckSpec, Context, check, seed_for
from autograder.checking.held_out import HELD_OUT_DRAWS

ROOT = Path(__file__).resolve().parents[1]
SECRET_CALLS = {"secret_seed", "secret_rng", "secret_state"}
SUBMISSION = "def train_lm(model, stream, **settings):\n    return []\n"  # any graded code
SUBMISSION_SEED = zlib.crc32(SUBMISSION.encode())  # as the runner computes it: the worker can too


def spec_of(assignment_id: str, name: str) -> CheckSpec:
    return next(fn.lmgrade_check for fn in assignments.get(assignment_id).checks() if fn.lmgrade_check.name == name)


def context(assignment_id: str, name: str, submission_seed: int = SUBMISSION_SEED, ref=None, spec=None) -> Context:
    assignment = assignments.get(assignment_id)
    return Context(student=None, ref=ref or assignment.reference(), spec=spec or spec_of(assignment_id, name),
                   submission_seed=submission_seed)


def purposes_in(path: Path) -> set[str]:
    """The purpose strings of every secret_* call in a hidden checks file (`t.secret_rng("...")`,
    `secret_seed(t, "...")`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            literals = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if name in SECRET_CALLS and literals:
                found.add(literals[0])
    return found


def test_the_list_of_held_out_draws_is_every_secret_draw_in_the_hidden_checks():
    for assignment_id in assignments.IDS:
        path = ROOT / "assignments" / assignment_id / "hidden_checks.py"
        listed = {purpose for a, _, purpose, _ in HELD_OUT_DRAWS if a == assignment_id}
        assert purposes_in(path) == listed, assignment_id
        names = {fn.lmgrade_check.name for fn in assignments.get(assignment_id).checks()}
        assert {c for a, c, _, _ in HELD_OUT_DRAWS if a == assignment_id} <= names


def test_no_hidden_check_seeds_a_draw_from_what_the_worker_knows():
    """The old Q8 draw was default_rng([t.seed, t.submission_seed]): both known to the worker."""
    for assignment_id in assignments.IDS:
        text = (ROOT / "assignments" / assignment_id / "hidden_checks.py").read_text()
        assert "submission_seed" not in text, assignment_id
        assert "hashlib" not in text, f"{assignment_id}: a second secret; use Context.secret_seed"


@pytest.mark.parametrize("draw", HELD_OUT_DRAWS, ids=lambda d: f"{d[1]}:{d[2]}")
def test_a_held_out_draw_is_none_of_the_seeds_the_worker_can_compute(draw, tmp_path):
    assignment_id, name, purpose, _ = draw
    assignment = assignments.get(assignment_id)
    secret = context(assignment_id, name).secret_seed(purpose)
    # the engine's construction with every file the worker can read in place of the two it cannot
    public = [assignment.dir / "public_checks.py", assignment.starter_path, assignment.fixtures_path,
              ROOT / "autograder" / "checking" / "checks.py", ROOT / "autograder" / "checking" / "held_out.py",
              assignment.source_path]
    guesses = set()
    for checks_file in public:
        for reference_file in public:
            spec = CheckSpec(**{**vars(spec_of(assignment_id, name)), "source": str(checks_file)})
            ref = type("Ref", (), {"__file__": str(reference_file)})
            guesses.add(context(assignment_id, name, ref=ref, spec=spec).secret_seed(purpose))
    plain = [seed_for(name), SUBMISSION_SEED, seed_for(name) ^ SUBMISSION_SEED]
    old = [int(np.random.default_rng([seed_for(name), SUBMISSION_SEED]).integers(2 ** 63))]
    assert secret not in guesses | set(plain) | set(old)
    # and it hangs on the hidden file's bytes: one changed byte, another seed
    copy = tmp_path / "hidden_checks.py"
    copy.write_text((assignment.dir / "hidden_checks.py").read_text() + "\n#\n")
    spec = CheckSpec(**{**vars(spec_of(assignment_id, name)), "source": str(copy)})
    assert context(assignment_id, name, spec=spec).secret_seed(purpose) != secret


@pytest.mark.parametrize("draw", HELD_OUT_DRAWS, ids=lambda d: f"{d[1]}:{d[2]}")
def test_two_submissions_draw_differently_and_one_submission_the_same_every_run(draw):
    assignment_id, name, purpose, _ = draw
    first = context(assignment_id, name).secret_rng(purpose).integers(0, 2 ** 62, size=4)
    again = context(assignment_id, name).secret_rng(purpose).integers(0, 2 ** 62, size=4)
    other = context(assignment_id, name, SUBMISSION_SEED + 1).secret_rng(purpose).integers(0, 2 ** 62, size=4)
    assert first.tolist() == again.tolist()
    assert first.tolist() != other.tolist()


def test_the_held_out_data_itself_differs_between_submissions():
    """What the checks score on: Q8's digit strings (rnn_lm), the sorting strings and fresh sentences (transformer)."""
    rnn = next(fn for fn in assignments.get("rnn_lm").checks() if fn.lmgrade_check.name == "seq2seq_reversal")
    digit_pairs = rnn.__globals__["digit_pairs"]
    a, b = (digit_pairs(context("rnn_lm", "seq2seq_reversal", s).secret_rng("held-out pairs"), 500)[0]
            for s in (1, 2))
    assert not np.array_equal(a.numpy(), b.numpy())
    sort = next(fn for fn in assignments.get("transformer").checks() if fn.lmgrade_check.name == "seq2seq_sorting")
    sort_pairs = sort.__globals__["sort_pairs"]
    a, b = (sort_pairs(100, context("transformer", "seq2seq_sorting", s).secret_seed("held-out strings"))[0]
            for s in (1, 2))
    assert not np.array_equal(a.numpy(), b.numpy())
    language, _ = sort.__globals__["synthetic_language"]()
    a, b = (language.sample(20, seed=context("transformer", "synthetic_perplexity", s).secret_seed("held-out sentences"))
            for s in (1, 2))
    assert a != b


def test_secret_starts_differ_between_submissions_and_repeat_for_one():
    import torch
    ref = assignments.get("transformer").reference()
    config = dict(vocab_size=11, d_model=8, n_heads=2, d_ff=12, n_layers=1, max_len=6)

    def start(submission_seed):
        t = context("transformer", "seq2seq_sorting", submission_seed)
        return t.secret_state("initial weights", lambda: ref.Seq2Seq(**config))

    torch.manual_seed(3)
    before = torch.random.get_rng_state()
    a, again, b = start(1), start(1), start(2)
    assert torch.equal(torch.random.get_rng_state(), before)  # torch's global generator left alone
    assert all(torch.equal(a[k], again[k]) for k in a)
    assert not torch.equal(a["emb.weight"], b["emb.weight"])


def test_the_same_submission_gets_the_same_secret_in_another_process():
    """Nothing per process (hash randomization, a random key made at start-up) goes into the secret."""
    here = context("rnn_lm", "seq2seq_reversal").secret_seed("held-out pairs")
    code = ("from tests.test_secrets import context; "
            "print(context('rnn_lm', 'seq2seq_reversal').secret_seed('held-out pairs'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": "/usr/bin:/bin"})
    assert int(out.stdout.strip()) == here


def test_a_public_check_or_a_missing_file_has_no_secret():
    public = next(fn.lmgrade_check for fn in assignments.get("rnn_lm").checks() if fn.lmgrade_check.public)
    with pytest.raises(RuntimeError, match="public"):
        context("rnn_lm", "", spec=public).secret_seed("x")
    with pytest.raises(RuntimeError, match="no grader secret"):
        Context(student=None, ref=None, spec=spec_of("rnn_lm", "seq2seq_reversal")).secret_seed("x")
    made_here = check(1, 1, "x")(lambda t: None).lmgrade_check
    assert made_here.source == __file__  # a check's file is where it was declared


def test_seeds_have_the_bits_asked_for():
    t = context("transformer", "shakespeare_perplexity")
    assert 0 <= t.secret_seed("batch seed", bits=31) < 2 ** 31
    assert max(context("transformer", "shakespeare_perplexity", s).secret_seed("x") for s in range(16)) > 2 ** 60
