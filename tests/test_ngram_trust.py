"""Q6 believes nothing the student's model says about itself (issue 9, class 1).

Models are scored from whole next-word distributions that the grader checks and reads itself; the
held-out words never reach the student's process; the synthetic language's seed is the grader's
secret. Each attack below is a build_model a hostile student could submit; each gains nothing.
The attacks run on the synthetic check (seconds); the Shakespeare check shares its code path.
"""
import math
import types

import numpy as np
import pytest

from autograder.authoring import assignments
from autograder.checking.checks import Context, check
from autograder.checking.perplexity import plan_positions
from autograder.checking.remote import InProcessChannel, Student
from autograder.data.synthetic import HiddenMarkovLanguage
from autograder.grading import runner
from tests.helpers import solution_text

pytestmark = pytest.mark.usefixtures("policy_off")  # these attacks test the layers beneath the policy

NGRAM = assignments.get("ngram")
CHEAP = "NGramLM(2, build_vocab(train, 1), 0.01).fit(train)"  # within the synthetic margin, trains in a blink


def hidden():
    return assignments.load_module(NGRAM.dir / "hidden_checks.py", "lmgrade_checks_ngram_hidden")


def grade_checks(tmp_path, monkeypatch, text: str, names: set[str]) -> dict[str, tuple[bool, str]]:
    path = tmp_path / "submission.py"
    path.write_text(text)
    real = NGRAM.checks
    monkeypatch.setattr(NGRAM, "checks", lambda public_only=False: [
        fn for fn in real(public_only) if fn.lmgrade_check.name in names])
    report = runner.grade(path, NGRAM)
    return {r.name: (r.passed, r.output) for r in report.results}


def with_build_model(body: str) -> str:
    """The staff solution with build_model replaced (a later definition wins)."""
    return solution_text() + "\n\n" + body


WRAPPER = '''
class Wrapped:
    def __init__(self, lm):
        self.lm, self.n, self.vocab = lm, lm.n, lm.vocab

    def prob(self, word, context):
        return self.lm.prob(word, context)

    def logprob(self, word, context):
        return self.lm.logprob(word, context)
'''


def test_logprob_returning_zero_gains_nothing(tmp_path, monkeypatch):
    """Old hole: the perplexity came from logprob, so logprob = 0 meant perplexity 1."""
    text = with_build_model(WRAPPER + f'''
class Liar(Wrapped):
    def logprob(self, word, context):
        return 0.0

def build_model(train, validation):
    return Liar({CHEAP})
''')
    results = grade_checks(tmp_path, monkeypatch, text, {"synthetic_floor", "public_build_model"})
    assert not results["synthetic_floor"][0] and not results["public_build_model"][0]
    assert "vs log of its prob" in results["synthetic_floor"][1]


def test_unnormalized_distributions_gain_nothing(tmp_path, monkeypatch):
    """Interpolation weights that sum to 3 'beat' every model: refused before any perplexity."""
    text = solution_text().replace("    return InterpolatedLM(models, lambdas)", "    return InterpolatedLM(models, [1.0, 1.0, 1.0])")
    results = grade_checks(tmp_path, monkeypatch, text, {"synthetic_floor", "public_build_model"})
    assert not results["synthetic_floor"][0] and not results["public_build_model"][0]
    # validation is scored first, before the model sees held-out text: the message can name the context
    assert "not 1" in results["synthetic_floor"][1] and "held-out" not in results["synthetic_floor"][1]


def test_a_distribution_that_sums_to_one_only_where_checked_gains_nothing(tmp_path, monkeypatch):
    """Every scored context is checked, not a few: inflating only contexts never asked before fails too."""
    text = with_build_model(WRAPPER + f'''
class Sly(Wrapped):
    seen = set()

    def prob(self, word, context):
        p = self.lm.prob(word, context)
        return p * 1.5 if len(Sly.seen) > 20 else p

import autograder.sandbox.support as _support
_real = _support.NextWordProbe.distributions

def _patched(self, contexts):
    for c in contexts:
        Sly.seen.add(tuple(c))
    return _real(self, contexts)

_support.NextWordProbe.distributions = _patched

def build_model(train, validation):
    return Sly({CHEAP})
''')
    results = grade_checks(tmp_path, monkeypatch, text, {"synthetic_floor"})
    assert not results["synthetic_floor"][0] and "not 1" in results["synthetic_floor"][1]


FRAME_SCAN = '''
import gc
import sys


def scan_for_text(skip_ids):
    """Every list of sentences reachable from the caller's frames or the garbage collector, other
    than the ones this model was trained on: where held-out text would be if it were here."""
    found = []
    frame = sys._getframe(1)
    candidates = []
    while frame is not None:
        candidates += list(frame.f_locals.values())
        frame = frame.f_back
    candidates += [o for o in gc.get_objects() if type(o) is list]
    for value in candidates:
        if id(value) in skip_ids or type(value) is not list or len(value) < 100:
            continue
        if all(type(s) is list and all(type(w) is str for w in s) for s in value[:50]):
            found.append(len(value))
    return found
'''


def test_inspecting_frames_and_memory_finds_no_held_out_text(tmp_path, monkeypatch):
    text = with_build_model(WRAPPER + FRAME_SCAN + f'''
class Peeker(Wrapped):
    reported = False

    def prob(self, word, context):
        if not Peeker.reported:  # anything found would break normalization, failing the check
            Peeker.reported = True
            Peeker.found = scan_for_text(self.skip)
            print("FOUND", Peeker.found)  # a print is no channel out: not shown for held-out checks
        return self.lm.prob(word, context) * (2 if Peeker.found else 1)


def build_model(train, validation):
    model = Peeker({CHEAP})
    model.skip = {{id(train), id(validation)}}
    return model
''')
    passed, output = grade_checks(tmp_path, monkeypatch, text, {"synthetic_floor"})["synthetic_floor"]
    assert passed, output
    assert "FOUND" not in output and "not shown for this check" in output


def test_the_frame_scan_would_find_text_that_was_there():
    """The attack above is real: given a caller holding sentences, it finds them."""
    module = types.ModuleType("attack")
    exec(FRAME_SCAN, module.__dict__)

    def grader_that_holds_the_text():
        heldout = [["w1", "w2"]] * 150  # noqa: F841 - what the scan looks for
        return module.scan_for_text(set())

    assert 150 in grader_that_holds_the_text()


MEMORIZER = '''
class Memorizer:
    """Puts half its mass on the words that followed its context's tail in contexts asked before:
    in text order, the next position's context holds the word being predicted."""

    def __init__(self, lm):
        self.lm, self.n, self.vocab = lm, lm.n, lm.vocab
        self.asked, self.rows = [], {}

    def prob(self, word, context):
        context = tuple(context)
        if context not in self.rows:
            tail = context[1:]
            hits = {c[-1] for c in self.asked if c[:-1] == tail}
            self.asked.append(context)
            self.rows[context] = hits
        hits = self.rows[context]
        p = self.lm.prob(word, context)
        return 0.5 * p + 0.5 / len(hits) if word in hits else (p if not hits else 0.5 * p)

    def logprob(self, word, context):
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf
'''


def in_process(module) -> Context:
    """A check context whose student is `module`, answered in this process by the worker's own code."""
    spec = check(6, 1, "in-process")(lambda t: None).lmgrade_check
    return Context(student=Student(InProcessChannel(module)), ref=None, spec=spec)


def test_memorizing_asked_contexts_gains_nothing():
    """Through the grader's own code path (in-process student): a model that remembers the contexts
    it was asked gains a lot when every position's context is asked (shuffled), and nothing under
    the grader's plan (one later position per sentence, the all-<s> context first)."""
    language = HiddenMarkovLanguage.random(seed=5, vocab_size=40)
    train, heldout = language.sample(3000, seed=1), language.sample(600, seed=2)
    module = types.ModuleType("submission")
    exec(solution_text() + "\n" + MEMORIZER, module.__dict__)
    words = sorted(module.build_vocab(train, 1))
    base = module.NGramLM(4, set(words), 0.01).fit(train)
    module.honest, module.cheat = base, module.Memorizer(base)
    t = in_process(module)

    def graded(name):
        rng = np.random.default_rng(0)
        plan = plan_positions(heldout, None, rng)
        lm = getattr(t.student, name).get()  # a handle, as build_model's result is
        [ppl] = hidden().score_from_distributions(t, lm, 4, words, [(heldout, plan, True)], rng, name, batch=64)
        return ppl

    honest, cheat = graded("honest"), graded("cheat")
    assert cheat >= 0.99 * honest

    # the naive alternative: every position's context, distinct and shuffled
    memorizer = module.Memorizer(base)
    positions = [(s, i) for s, sentence in enumerate(heldout) for i in range(len(sentence) + 1)]
    contexts = [tuple((["<s>"] * 3 + heldout[s])[i:i + 3]) for s, i in positions]
    order = sorted(set(contexts))
    rows = {c: [memorizer.prob(w, c) for w in words] for c in (order[k] for k in np.random.default_rng(1).permutation(len(order)))}
    assert all(abs(sum(row) - 1) < 1e-9 for row in rows.values())
    logp = [math.log(rows[c][words.index((heldout[s] + ["</s>"])[i])]) for (s, i), c in zip(positions, contexts)]
    every_position_shuffled = math.exp(-np.mean(logp))
    assert every_position_shuffled < 0.8 * honest, (every_position_shuffled, honest, cheat)


SEED_HUNTER = '''
import zlib


def hunt(train, own_code):
    """Try every seed this code could know (small numbers, the old fixed one, crc32 of its own code):
    a language's words depend on its seed alone, so matching them against the training text is cheap."""
    from autograder.data.synthetic import HiddenMarkovLanguage
    seen = {w for s in train for w in s}
    for seed in [1234, zlib.crc32(own_code.encode())] + list(range(200)):
        if seen <= set(HiddenMarkovLanguage.random(seed=seed).words):
            return seed
    return None
'''


def test_the_synthetic_seed_cannot_be_derived_by_the_worker(tmp_path, monkeypatch):
    text = with_build_model(SEED_HUNTER + f'''
def build_model(train, validation):
    import linecache
    own = "".join("".join(entry[2]) for name, entry in sorted(linecache.cache.items())
                  if name.startswith("<graded cell"))  # its own graded cells, as the grader hashed them
    seed = hunt(train, own)
    if seed is not None:  # before any held-out text is asked about, so the message would be shown
        raise RuntimeError(f"SEED {{seed}}")
    return {CHEAP}
''')
    passed, output = grade_checks(tmp_path, monkeypatch, text, {"synthetic_floor"})["synthetic_floor"]
    assert passed and "SEED" not in output, output


def test_the_seed_hunter_finds_a_guessable_seed():
    """Against the old scheme (language 1234, training text seed 1) the same hunt succeeds."""
    module = types.ModuleType("attack")
    exec(SEED_HUNTER, module.__dict__)
    language = HiddenMarkovLanguage.random(seed=1234)
    assert module.hunt(language.sample(200, seed=1), "") == 1234


def test_secret_seed_is_64_bits_and_depends_on_what_the_worker_cannot_read(tmp_path):
    hc = hidden()
    ref = NGRAM.reference()
    spec = check(6, 1, "x")(lambda t: None).lmgrade_check

    def seed(submission_seed, module=hc, reference=ref):
        return module.secret_seed(Context(student=None, ref=reference, spec=spec, submission_seed=submission_seed), "synthetic")

    assert seed(1) == seed(1) and seed(1) != seed(2)
    assert max(seed(s) for s in range(20)) > 2 ** 60  # 64 bits, not a small number
    edited = tmp_path / "solution.py"
    edited.write_text(NGRAM.reference_path.read_text() + "\n# another staff solution\n")
    other_ref = types.SimpleNamespace(__file__=str(edited))
    assert seed(1, reference=other_ref) != seed(1)


def test_held_out_words_never_reach_the_worker():
    """What the probe is sent: contexts only, each distinct, the all-<s> context first, never in text order."""
    language = HiddenMarkovLanguage.random(seed=9, vocab_size=30)
    train, heldout = language.sample(2000, seed=1), language.sample(300, seed=2)
    sent = []

    class Recorder:
        n, vocab = 3, None

        def prob(self, word, context):
            if not sent or sent[-1] != tuple(context):
                sent.append(tuple(context))
            return 1.0 / len(words)

    words = sorted({w for s in train for w in s} | {"</s>", "<unk>"})
    module = types.ModuleType("submission")
    module.model = Recorder()
    t = in_process(module)
    rng = np.random.default_rng(3)
    plan = plan_positions(heldout, None, rng)
    [ppl] = hidden().score_from_distributions(t, t.student.model.get(), 3, words, [(heldout, plan, True)], rng, "m",
                                              batch=16)
    assert ppl == pytest.approx(len(words))
    assert sent[0] == ("<s>", "<s>") and len(sent) == len(set(sent))
    positions = {(s, i) for s, i in plan.positions}
    assert all(sum(1 for s2, _ in positions if s2 == s) <= 2 for s, _ in positions)  # first + one later per sentence
    in_text_order = [c for s, i in sorted(positions) for c in [tuple((["<s>"] * 2 + heldout[s])[i:i + 2])]]
    assert sent != list(dict.fromkeys(in_text_order))
    assert math.isfinite(ppl)


def test_scoring_plan_weights_and_paired_ratio():
    from autograder.checking.perplexity import log_ratio, plan_perplexity
    rng = np.random.default_rng(0)
    sentences = [["a"] * int(n) for n in rng.integers(0, 9, 400)]
    plan = plan_positions(sentences, 50, rng)
    assert plan.weights.sum() == pytest.approx(plan.n_tokens) and plan.n_tokens == sum(len(s) + 1 for s in sentences)
    assert len(plan.prefix(10).positions) == len(sentences) + 10
    assert plan_perplexity(plan, np.full(len(plan.positions), math.log(0.25))) == pytest.approx(4.0)
    same = rng.normal(-3, 1, len(plan.positions))
    assert log_ratio(plan, same, same) == (0.0, 0.0)
    value, se = log_ratio(plan, same - 0.1, same)  # 0.1 nats worse at every position
    assert value == pytest.approx(0.1) and se == pytest.approx(0.0, abs=1e-12)
    short = [["a"]] * 30  # one later position per sentence: the sample is the whole text
    plan = plan_positions(short, None, rng)
    lp = rng.normal(-2, 1, len(plan.positions))
    exact = math.exp(-lp.sum() / 60)
    assert plan_perplexity(plan, lp) == pytest.approx(exact)


def test_sampled_estimate_is_close_to_the_whole_text():
    """The ratio estimator over one later position per sentence tracks the whole-text perplexity."""
    from autograder.checking.perplexity import plan_perplexity
    language = HiddenMarkovLanguage.random(seed=2, vocab_size=30)
    heldout = language.sample(3000, seed=4)
    logps = [language.token_logprobs(s) for s in heldout]
    whole = math.exp(-np.concatenate(logps).mean())
    rng = np.random.default_rng(1)
    estimates = [plan_perplexity(p, [logps[s][i] for s, i in p.positions])
                 for p in (plan_positions(heldout, None, rng) for _ in range(20))]
    assert abs(np.mean(estimates) / whole - 1) < 0.01



# ---- nothing the student's code chose reaches a message about held-out data (issue 30) -------------
ENCODER = '''
import zlib


class Encoder(Wrapped):
    """Spells the first held-out context it meets (one not in the validation text) into what it
    returns: `how` "sum" makes that row sum to 1 + code * 1e-4 (the issue's attack: the sum was printed to
    9 digits); "ratio" keeps every row a distribution but tilts all of them by the code, which moves the
    perplexity; "raise" raises an error that names the context."""

    def __init__(self, lm, known, how):
        super().__init__(lm)
        self.known, self.how, self.code, self.first = known, how, None, None

    def prob(self, word, context):
        context = tuple(context)
        p = self.lm.prob(word, context)
        if self.code is None and context not in self.known:
            self.first, self.code = context, zlib.crc32(" ".join(context).encode()) % 1000
            if self.how == "raise":
                raise ValueError(f"held-out context {context}")
        if self.code is None:
            return p
        if self.how == "sum":
            return p * (1 + self.code * 1e-4) if context == self.first else p
        return (1 - 0.01 * self.code / 1000) * p + 0.01 * self.code / 1000 / len(self.vocab)


def known_contexts(sentences, n):
    return {tuple((["<s>"] * (n - 1) + s)[i:i + n - 1]) for s in sentences for i in range(len(s) + 1)}
'''


def sealed_feedback(monkeypatch, how: str, plan_seed: int) -> tuple[str, tuple]:
    """synthetic_floor's whole feedback (message and notes) for an Encoder, with the grader's plan of
    held-out positions drawn from `plan_seed` (so other held-out contexts are asked), and the held-out
    context the model encoded."""
    from tests.helpers import staff_module
    module = staff_module("ngram")
    exec(WRAPPER + ENCODER, module.__dict__)  # noqa: S102 - the attack, in the staff module's namespace
    staff = module.build_model

    def encoding_model(train, validation):  # the staff model, whose contexts have n - 1 >= 2 words
        lm = staff(train, validation)
        return module.Encoder(lm, module.known_contexts(validation, lm.n), how)

    module.build_model = encoding_model
    fn = next(f for f in NGRAM.checks() if f.lmgrade_check.name == "synthetic_floor")
    real = fn.__globals__["secret_seed"]
    monkeypatch.setitem(fn.__globals__, "secret_seed",
                        lambda t, label: plan_seed if label == "synthetic plan" else real(t, label))
    models = []
    channel = InProcessChannel(module)
    build = module.build_model
    module.build_model = lambda train, validation: models.append(build(train, validation)) or models[-1]
    ctx = Context(student=Student(channel), ref=NGRAM.reference(), spec=fn.lmgrade_check)
    try:
        fn(ctx)
        feedback = "Passed.\n" + "\n".join(ctx.notes)
    except Exception as exc:  # noqa: BLE001 - the runner shows str() of what the check raised
        feedback = str(exc)
    return feedback, models[-1].first


@pytest.mark.parametrize("how", ["sum", "ratio", "raise"])
def test_distributions_that_encode_a_held_out_context_tell_the_student_nothing(monkeypatch, how):
    first, context_a = sealed_feedback(monkeypatch, how, 1)
    second, context_b = sealed_feedback(monkeypatch, how, 2)
    assert context_a != context_b  # two different held-out contexts were encoded ...
    assert first == second  # ... and the feedback is the same bytes
    assert str(context_a) not in first and "held-out" in first
    if how == "ratio":  # valid distributions within the margin: passes, with the rule and no figure
        assert first.startswith("Passed.") and "within the threshold" in first
    else:
        assert "sum to 1" in first and "Nothing else is shown" in first
