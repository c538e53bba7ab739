"""Hidden checks for `ngram`. Never shipped to students.

Each question is graded on its own where possible: Q4 and Q5 use grader-made table models
(`autograder/sandbox/support.py`), so a bug in the student's Q3 classes costs only Q3 (and Q6, which by
design scores the student's whole pipeline). Where a check still calls an earlier question's
function (`NGramLM` counts with `count_ngrams`, `tune_lambdas` ranks with `perplexity`), it says
so with `needs`, and a failure there points at the earlier function first.

Q6 scores language models only from whole next-word distributions (see autograder/checking/perplexity.py):
the held-out words never reach the student's process, and the synthetic language's seed is a
secret of the grader.
"""
import math
from functools import lru_cache

import numpy as np

from autograder.checking import properties
from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_equal
from autograder.checking.perplexity import (check_distributions, context_at, log_ratio, perplexity_from_logprobs,
                                   plan_logprobs, plan_perplexity, plan_positions, request_order, target_at,
                                   transition_test)
from autograder.errors import CheckFailed
from autograder.checking.purity import call_pure, call_twice
from autograder.checking.reference_results import reference_result
from autograder.sandbox.support import TableLM, random_sentences

PPL_MARGIN = 0.10  # Q6 thresholds: the reference's perplexity on the same positions plus 10%
# Q6 flags (bench/ngram_thresholds.py): correct models stay above these ratios under every plan;
# models trained on the held-out text fall below them.
BELOW_REFERENCE = 0.65  # held-out perplexity below 0.65 x the staff model's: it has seen the test text
BELOW_VALIDATION = 0.80  # its lead over the staff model on held-out text 0.80 x its lead on validation: the same
FLOOR_SLACK = 0.02  # synthetic: more than 2% below the Bayes-optimal perplexity is reading the future
ROUNDS = (150, 300, 600, 1000)  # test sentences with one later position scored, asked for until decided
Z = 3.0  # a round decides only when the estimate is this many standard errors from every line it is judged by
SYNTHETIC_HELDOUT = 4000  # synthetic held-out sentences, one later position scored in each
FALSE_FAIL = 1e-4  # each sampling test fails a correct generator with this probability (seeded: once for all)
Q6_NEEDS = ("build_vocab", "pad", "count_ngrams", "NGramLM", "InterpolatedLM", "tune_lambdas",
            "sentence_logprob", "perplexity")
TRICKY_LINES = [
    "", "   ", "O'er the hills--and far away!", "'Tis NOT so; 'twas\tthen.", "I'll o'er-leap it,",
    "Ha, ha, ha! HA!", "In 1599, 2s. 2d. paid", '"Hark!" quoth he', "lovers' eyes", "rock'n'roll'd",
    "don't, won't... can't?", "a  b\n c", "What's in a name?", "MACBETH. [Aside] Two truths",
    "Naïve café — déjà vu", "Die Straße, ﬁne ÆSOP", "snake_case and CamelCase", "x1y2 z_3", "Ah—'tis 'twixt 'em'",
]


# ---- helpers: random data the trusted side builds ---------------------------------------------
def random_corpus(rng, n_sentences: int, vocab_size: int, max_len: int = 12) -> list[list[str]]:
    """Zipf-like words so that some n-grams repeat and others are rare; some empty sentences; a few
    sentences that repeat one rare word, so that it reaches a count only within one sentence."""
    weights = 1.0 / np.arange(1, vocab_size + 1)
    weights /= weights.sum()
    words = [f"w{i}" for i in range(vocab_size)]
    lengths = rng.integers(0, max_len + 1, n_sentences)
    corpus = [[words[j] for j in rng.choice(vocab_size, size=n, p=weights)] for n in lengths]
    for k, i in enumerate(rng.choice(n_sentences, size=min(4, n_sentences), replace=False)):
        corpus[i] = corpus[i][:3] + [f"rep{k}"] * (k + 2) + corpus[i][3:]  # rep0 twice, rep1 3 times, ...
    return corpus


def random_table(rng, n: int, words: list[str]) -> tuple[list[str], dict]:
    """A full table model over `words` + </s> with Dirichlet next-word distributions."""
    vocab = words + ["</s>"]
    histories = [()]
    for _ in range(n - 1):
        histories = [h + (w,) for h in histories for w in ["<s>"] + words]
    table = {}
    for h in histories:
        p = rng.dirichlet(np.full(len(vocab), 0.5))
        table[h] = {w: float(x) for w, x in zip(vocab, p)}
    return vocab, table


def contexts_for(sentence: list[str], n: int) -> list[tuple[str, tuple]]:
    """(word, context) for every prediction in a sentence, contexts cut to n-1 tokens."""
    return [(target_at(sentence, i), context_at(sentence, i, max(n, 1))) for i in range(len(sentence) + 1)]


def table_sentence_logprob(lm: TableLM, sentence) -> float:
    return sum(lm.logprob(w, c) for w, c in contexts_for(sentence, lm.n))


def compare_pairs(got, expected, pairs, what: str, *, rtol: float = 1e-6, atol: float = 1e-12) -> None:
    """Values of `what(word, context)` over pairs; a failure names the first bad word and context.

    Tolerances belong to the expected values (exact float64 counts ratios), loose enough for a
    model that returns float32.
    """
    if not isinstance(got, (list, tuple)) or len(got) != len(pairs):
        raise CheckFailed(f"{what}: expected {len(pairs)} numbers, got {type(got).__name__}")
    bad = []
    for (word, context), g, e in zip(pairs, got, expected):
        try:
            g = float(g)
        except (TypeError, ValueError):
            raise CheckFailed(f"{what}: {what.rsplit(').', 1)[-1].split('(')[0]}({word!r}, {context}) returned "
                              f"{type(g).__name__}, not a number") from None
        if math.isinf(e) or math.isinf(g):
            ok = g == e
        else:
            ok = abs(g - e) <= atol + rtol * abs(e)
        if not ok:
            bad.append((word, context, g, e))
    if bad:
        word, context, g, e = bad[0]
        name = what.rsplit(").", 1)[-1].split("(")[0]  # the method: "NGramLM(2, vocab).logprob(...)" -> logprob
        zero = " (probability 0: return -math.inf)" if e == -math.inf else ""
        ratios = [g / e for _, _, g, e in bad if math.isfinite(g) and math.isfinite(e) and e != 0]
        base = {"10": 1 / math.log(10), "2": 1 / math.log(2)}
        cause = next((f" Every difference is a factor {r:.4f}: a base-{b} logarithm? Use math.log (natural log)."
                      for b, r in base.items() if ratios and all(abs(x - r) < 1e-6 for x in ratios)), "")
        raise CheckFailed(f"{what}: {name}({word!r}, {context}) returned {g:.10g}, expected {e:.10g}{zero}"
                          + (f"; {len(bad) - 1} more of {len(pairs)} pairs differ." if len(bad) > 1 else ".") + cause)


def reference_logprob(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


def pure(t, call, *args, what: str, **kwargs):
    """`call_pure` (the arguments come back unchanged), then the matrix's `generator` property of the same call:
    nothing here but `generate` draws random numbers, and that from its own random.Random(seed), so a
    `random.seed` or `np.random.seed` left inside moves the global generators for everyone."""
    result = call_pure(call, *args, what=what, **kwargs)
    name, _, rest = what.partition("(")
    properties.run_generator(t, name, call, rest[:-1] if rest.endswith(")") else rest, args, kwargs)
    return result


def fitted(t, remote_class, args: tuple, corpus, what: str, **kwargs):
    """`remote_class(*args).fit(corpus)`, checking that neither the vocabulary nor the corpus changed
    and that fit returned the model."""
    vocab = args[1] if remote_class._label == "NGramLM" else args[0]
    vocab_handle = t.student.put(vocab, "the vocabulary")
    args = tuple(vocab_handle if a is vocab else a for a in args)
    lm = remote_class(*args, **kwargs)
    result = call_pure(lm.fit, corpus, what=f"{what}.fit(corpus)")
    # the generator property on a model of its own (a second fit of `lm` could count the corpus twice)
    properties.run_generator(t, f"{what}.fit", remote_class(*args, **kwargs).fit, "corpus", (corpus,))
    if result is None:
        raise CheckFailed(f"{what}.fit(corpus) returned None: the docstring says fit returns self, so that "
                          f"{remote_class._label}(...).fit(...) can be used in one line.")
    after = vocab_handle.get()
    if after != vocab:
        raise CheckFailed(f"{what}: the vocabulary set passed to the model changed (now {len(after)} words, "
                          f"was {len(vocab)}); the model must not modify its arguments")
    return result


def _pairs(rng, corpus, vocab, n, as_lists: bool = False):
    """(word, context) pairs from seen contexts, unseen contexts, short and long contexts."""
    words = sorted(vocab)
    pairs = []
    for s in corpus[:40]:
        pairs += contexts_for(s, n)
    for _ in range(60):
        length = int(rng.integers(0, n + 2))
        pairs.append((words[rng.integers(len(words))], tuple(words[rng.integers(len(words))] for _ in range(length))))
    pairs.append(("w0", ("never", "seen")))
    if as_lists:  # "a tuple or list of the preceding tokens"
        pairs = [(w, list(c)) if i % 3 == 0 else (w, c) for i, (w, c) in enumerate(pairs)]
    return pairs


def secret_seed(t, label: str) -> int:
    """64 bits no student process can know (`Context.secret_seed`: the grader's one secret).

    Why: a seed the worker could compute (from its own code, or a small number) would let a model
    regenerate the synthetic language and its held-out text. Same submission, same seed, every run.
    """
    return t.secret_seed(label)


@lru_cache(maxsize=1)
def shakespeare_splits(ref) -> tuple:
    """Tokenized verse, OOV-replaced with a min_count=2 train vocabulary (the grader's, not the student's)."""
    from autograder.data import shakespeare
    tokenized = {s: [ref.tokenize(line) for line in shakespeare.lines(s)] for s in shakespeare.SPLITS}
    vocab = ref.build_vocab(tokenized["train"], 2)
    return tuple([ref.replace_oov(s, vocab) for s in tokenized[split]] for split in shakespeare.SPLITS)


def synthetic_texts(seed: int) -> tuple:
    """A hidden Markov language from a secret seed, and its train, validation and held-out texts."""
    from autograder.data.synthetic import HiddenMarkovLanguage
    language = HiddenMarkovLanguage.random(seed=seed)
    seeds = np.random.SeedSequence(seed).generate_state(3, np.uint64)
    return (language, language.sample(20_000, seed=int(seeds[0])), language.sample(2_000, seed=int(seeds[1])),
            language.sample(SYNTHETIC_HELDOUT, seed=int(seeds[2])))


def model_order(lm) -> int:
    n = lm.n.get()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
        raise CheckFailed(f"build_model(...): the model's attribute n should be an int between 1 and 10, got {n!r}")
    return n


class Scorer:
    """A student's model asked for whole next-word distributions, context by context.

    Only contexts cross to the student's process: distinct, the all-"<s>" one first, then shuffled,
    a few per request. Every distribution is checked here and the target's probability read here.
    Distributions already asked are kept, so a later round asks only for new contexts.
    """

    def __init__(self, t, lm, n: int, words: list[str], what: str, *, batch: int, rng):
        self.student = t.student
        self.probe = t.student.support("NextWordProbe", lm, words)
        self.n, self.words, self.what, self.batch, self.rng = n, words, what, batch, rng
        self.index = {w: i for i, w in enumerate(words)}
        self.table: dict[tuple, np.ndarray] = {}

    def logprobs(self, sentences, plan, *, held_out: bool) -> np.ndarray:
        """(P,) log-probabilities of the plan's targets.

        Once the model has seen a held-out context, every failure is the fixed text of
        `sealed_failure`: a sum, a value, a shape or an error message is the student's code's choice,
        and could spell out the held-out contexts it was shown (issue 30), even on validation text."""
        contexts = [context_at(sentences[s], i, self.n) for s, i in plan.positions]
        order = request_order([c for c in contexts if c not in self.table], ("<s>",) * (self.n - 1), self.rng)
        if held_out:
            self.student.seal()  # its prints and error messages could carry these contexts out
        quiet = held_out or self.student.sealed
        for start in range(0, len(order), self.batch):
            chunk = order[start:start + self.batch]
            try:
                rows = check_distributions(self.probe.distributions(chunk), chunk, len(self.words), self.what)
            except CheckFailed:
                if not quiet:
                    raise
                raise CheckFailed(sealed_failure(self.what, len(self.words))) from None
            self.table.update(zip(chunk, rows))
        return plan_logprobs(plan, sentences, self.n, self.table, self.index)


def sealed_failure(what: str, n_words: int) -> str:
    """The one message for any failure while the model has seen held-out text: fixed words only."""
    return (f"{what}: the next-word distributions of your model could not all be used once it had been shown "
            f"held-out contexts. Each must be {n_words} finite, non-negative probabilities that sum to 1 (within "
            "1e-6), returned without an error and in time. Nothing else is shown (what your code returns, prints "
            "or raises after seeing held-out text could carry that text out): run your model on the contexts of "
            "your validation text to find the problem.")


def score_from_distributions(t, lm, n: int, words: list[str], texts: list, rng, what: str, batch: int) -> list[float]:
    """Perplexity estimates of a student's model, one per (sentences, plan, held_out) in `texts`."""
    scorer = Scorer(t, lm, n, words, what, batch=batch, rng=rng)
    return [plan_perplexity(plan, scorer.logprobs(sentences, plan, held_out=held_out))
            for sentences, plan, held_out in texts]


def assert_prob_logprob_agree(lm, pairs, what: str) -> None:
    """logprob(w, c) == log(prob(w, c)) on grader-chosen pairs, -inf exactly where prob is 0."""
    probs, logps = lm.prob.map(pairs, timeout=120), lm.logprob.map(pairs, timeout=120)
    try:
        expected = [reference_logprob(float(p)) for p in probs]
    except (TypeError, ValueError):
        raise CheckFailed(f"{what}: prob returned something that is not a number") from None
    compare_pairs(logps, expected, pairs, f"{what}.logprob(word, context) vs log of its prob", rtol=0, atol=1e-6)


def judge(t, what: str, plan, logprobs, staff_logprobs, validation_plan, validation_logprobs,
          staff_validation_logprobs, *, last: bool, floor_logprobs=None) -> bool:
    """Threshold and plausibility of a sampled held-out perplexity; False while undecided.

    Everything is paired with the staff model on the same positions. Implausibly good is flagged,
    not rewarded: a perplexity far below the staff model's, or a lead over it on held-out text far
    beyond its lead on the validation text it was tuned on. A round decides only when the estimate
    is Z standard errors away from every line; the last round decides by the estimate.
    """
    ppl = plan_perplexity(plan, logprobs)
    # Fixed words only: the perplexity, the round that decided and the validation ratio all follow
    # from distributions the student's code chose after seeing held-out contexts (issue 30).
    line = (f"{what}: the perplexity on held-out positions, compared with the staff model's on the same positions "
            f"(threshold: {1 + PPL_MARGIN:.2f} x the staff model's)")
    floor = plan_perplexity(plan, floor_logprobs) if floor_logprobs is not None else None
    if floor is not None:
        line = line[:-1] + ", and never below the Bayes-optimal model's)"
    if not math.isfinite(ppl):
        raise CheckFailed(f"{line}: infinite. An infinite perplexity means some held-out word got probability 0: "
                          "smooth the model.")
    if floor is not None and ppl < floor * (1 - FLOOR_SLACK):
        raise CheckFailed(f"{line}: below the entropy floor of the language (the Bayes-optimal model's). The model "
                          "must be seeing the tokens it predicts. No points.")
    r, se = log_ratio(plan, logprobs, staff_logprobs)
    v, se_v = log_ratio(validation_plan, validation_logprobs, staff_validation_logprobs)
    se_both = math.hypot(se, se_v)
    if r + Z * se < math.log(BELOW_REFERENCE):
        raise CheckFailed(f"{line}: implausibly far below the staff model's (correct models stay above "
                          f"{BELOW_REFERENCE} of it): the model must have seen the held-out text. No points.")
    if (r - v) + Z * se_both < math.log(BELOW_VALIDATION):
        raise CheckFailed(f"{line}: far better on held-out text than on the validation text the model was tuned "
                          "on, which means the model has seen the held-out text. No points.")
    close = (abs(r - math.log(1 + PPL_MARGIN)) < Z * se or r - Z * se < math.log(BELOW_REFERENCE)
             or (r - v) - Z * se_both < math.log(BELOW_VALIDATION))
    if close and not last:
        return False
    if r > math.log(1 + PPL_MARGIN):
        raise CheckFailed(f"{line}: above the threshold. The model predicts held-out text worse than expected; "
                          "measure its perplexity on your validation text to improve it.")
    t.note(f"{line}: within the threshold.")
    return True


# ---- Q1 -------------------------------------------------------------------------------------
@check(1, 1, "tokenize: punctuation, apostrophes, case, digits, other scripts, real lines", uses=("tokenize",))
def tokenize_hidden(t):
    from autograder.data import shakespeare
    lines = shakespeare.lines("validation")
    picks = [lines[i] for i in t.rng.choice(len(lines), 300, replace=False)]
    got = t.student.tokenize.map([(line,) for line in TRICKY_LINES + picks])
    for line, g in zip(TRICKY_LINES + picks, got):
        assert_equal(g, t.ref.tokenize(line), f"tokenize({line!r})")


@check(1, 1, "build_vocab and replace_oov on random corpora (default min_count, repeats, no side effects)",
       uses=("build_vocab", "replace_oov"),
       hint="count every occurrence, also repeats inside one sentence; the default min_count is 2; "
            "return a new set or list and leave the arguments alone.")
def vocab_hidden(t):
    corpus = random_corpus(t.rng, 200, 80) + [["<s>", "w1"], ["<s>", "w2"]]
    for min_count in (1, 3):
        vocab = pure(t, t.student.build_vocab, corpus, min_count=min_count,
                     what=f"build_vocab(corpus, min_count={min_count})")
        if not isinstance(vocab, (set, frozenset)):
            raise CheckFailed(f"build_vocab(corpus, min_count={min_count}) returned a {type(vocab).__name__}; "
                              "the docstring says it returns a set")
        assert_equal(vocab, t.ref.build_vocab(corpus, min_count),
                     f"build_vocab(corpus of 202 sentences, min_count={min_count}) (words like 'rep1' occur 3 "
                     "times, all in one sentence)")
    assert_equal(t.student.build_vocab(corpus), t.ref.build_vocab(corpus, 2), "build_vocab(corpus) with the default min_count")
    vocab = t.ref.build_vocab(corpus, 3)
    sentence = corpus[0] + ["never-seen", "w79", "<s>", "never-seen"]
    got = pure(t, t.student.replace_oov, sentence, vocab, what="replace_oov(sentence, vocab)")
    assert_equal(got, t.ref.replace_oov(sentence, vocab), "replace_oov(sentence, vocab)")


# ---- Q2 -------------------------------------------------------------------------------------
@check(2, 1, "pad: orders 1 to 5, empty sentences, no side effects", uses=("pad",))
def pad_hidden(t):
    for tokens in (["to", "be", "or"], [], ["x"]):
        for n in (1, 2, 4, 5):
            got = pure(t, t.student.pad, tokens, n, what=f"pad({tokens}, {n})")
            assert_equal(got, t.ref.pad(tokens, n), f"pad({tokens}, {n})")


@check(2, 2, "count_ngrams: exact counts on a small case, orders 1-4",
       uses=("count_ngrams",), needs=(),
       hint="pad each sentence on its own (n-1 <s>, one </s>): a sentence of m tokens gives m+1 n-grams, "
            "even when m is 0.")
def counts_exact(t):
    sentences = [["a", "a", "a"], ["b"], [], ["a", "b", "a", "b"]]
    for n in (1, 2, 3, 4):
        got = pure(t, t.student.count_ngrams, sentences, n, what=f"count_ngrams(sentences, {n})")
        assert_equal(got, t.ref.count_ngrams(sentences, n),
                     f"count_ngrams([['a','a','a'], ['b'], [], ['a','b','a','b']], {n})")


@check(2, 1, "count_ngrams on a random corpus with repeats", uses=("count_ngrams",))
def counts_random(t):
    corpus = random_corpus(t.rng, 300, 40)
    for n in (2, 3):
        assert_equal(t.student.count_ngrams(corpus, n), t.ref.count_ngrams(corpus, n), f"count_ngrams(corpus, {n})")


@check(2, 1, "count_ngrams counts 1M tokens within 30 s", timeout=30, uses=("count_ngrams",))
def counts_speed(t):
    args = (t.seed, 50_000, 20, 30)  # 1M tokens over 30 words, made in the student's process
    got = t.student.count_ngrams(t.student.support("random_sentences", *args), 3)
    expected = t.ref.count_ngrams(random_sentences(*args), 3)
    if sum(got.values()) != sum(expected.values()):
        raise CheckFailed(f"count_ngrams(1M tokens, 3): total count {sum(got.values())}, expected {sum(expected.values())}")
    assert_equal(got, expected, "count_ngrams(1M tokens, 3)")


# ---- Q3 -------------------------------------------------------------------------------------
COUNT_NEEDS = ("pad", "count_ngrams")


@check(3, 1, "NGramLM MLE probabilities and log-probabilities (orders 1-4, seen and unseen contexts)",
       uses=("NGramLM",), needs=COUNT_NEEDS,
       hint="use only the last n-1 context tokens, left-padded with <s>; an unseen context gives 0.0, and "
            "logprob gives -math.inf where prob is 0.")
def mle_hidden(t):
    corpus = random_corpus(t.rng, 150, 30)
    vocab = t.ref.build_vocab(corpus, 1)
    for n in (1, 2, 3, 4):
        pairs = _pairs(t.rng, corpus, vocab, n, as_lists=True)
        ref_lm = t.ref.NGramLM(n, vocab, 0.0).fit(corpus)
        args = (n, vocab) if n != 2 else (n, vocab, 0.0)  # the default k is 0 (plain MLE)
        lm = fitted(t, t.student.NGramLM, args, corpus, f"NGramLM({n}, vocab)")
        expected = [ref_lm.prob(w, c) for w, c in pairs]
        compare_pairs(lm.prob.map(pairs), expected, pairs, f"NGramLM({n}, vocab, k=0).prob(word, context)")
        compare_pairs(lm.logprob.map(pairs), [reference_logprob(p) for p in expected], pairs,
                      f"NGramLM({n}, vocab, k=0).logprob(word, context)", rtol=0, atol=1e-6)


@check(3, 1, "NGramLM add-k probabilities and log-probabilities", uses=("NGramLM",), needs=COUNT_NEEDS,
       hint="(c(ctx, w) + k) / (c(ctx) + k * len(vocab)), with the context exactly as given (its last n-1 tokens): "
            "a context never counted, even one of words outside vocab, has c(ctx) = 0; do not map it to <unk>.")
def addk_hidden(t):
    corpus = random_corpus(t.rng, 150, 120)  # a long tail of words seen once: <unk> is a trained context
    vocab = t.ref.build_vocab(corpus, 2)
    corpus = [t.ref.replace_oov(s, vocab) for s in corpus]
    for n, k in ((1, 1.0), (2, 0.01), (3, 0.5)):
        pairs = _pairs(t.rng, corpus, vocab, n, as_lists=True)
        ref_lm = t.ref.NGramLM(n, vocab, k).fit(corpus)
        lm = t.student.NGramLM(n, vocab, k=k).fit(corpus)  # the keyword the docstring names
        expected = [ref_lm.prob(w, c) for w, c in pairs]
        compare_pairs(lm.prob.map(pairs), expected, pairs, f"NGramLM({n}, vocab, k={k}).prob(word, context)")
        compare_pairs(lm.logprob.map(pairs), [reference_logprob(p) for p in expected], pairs,
                      f"NGramLM({n}, vocab, k={k}).logprob(word, context)", rtol=0, atol=1e-6)


@check(3, 2, "probabilities over the vocabulary sum to 1 (seen and unseen contexts)", uses=("NGramLM",),
       hint="add-k divides by c(context) + k * len(vocab); len(vocab) counts </s> and <unk>.")
def normalization(t):
    corpus = random_corpus(t.rng, 150, 25)
    vocab = t.ref.build_vocab(corpus, 1)
    words = sorted(vocab)
    seen = [c for s in corpus[:5] for _, c in contexts_for(s, 3)][:6]
    unseen = [("w24", "w23"), ("never", "seen"), ("</s>", "w3")]
    for n, k, contexts in ((1, 0.0, [()]), (2, 0.0, [c[-1:] for c in seen]), (3, 0.0, seen),
                           (2, 0.1, [c[-1:] for c in seen + unseen]), (3, 0.7, seen + unseen)):
        lm = t.student.NGramLM(n, vocab, k).fit(corpus)
        rows = t.student.support("NextWordProbe", lm, words).distributions(contexts)
        check_distributions(rows, contexts, len(words), f"NGramLM({n}, vocab, k={k}): prob(w, context) for w in vocab")


@check(3, 1, "add-k gives every unseen n-gram nonzero probability", uses=("NGramLM",))
def unseen_nonzero(t):
    corpus = random_corpus(t.rng, 100, 30)
    vocab = t.ref.build_vocab(corpus, 1)
    words = sorted(vocab)
    counts = t.ref.count_ngrams(corpus, 3)
    unseen = []
    while len(unseen) < 200:
        w = [words[i] for i in t.rng.integers(0, len(words), 3)]
        if tuple(w) not in counts:
            unseen.append((w[2], (w[0], w[1])))
    got = t.student.NGramLM(3, vocab, 0.05).fit(corpus).prob.map(unseen)
    bad = [pair for pair, p in zip(unseen, got) if not float(p) > 0]
    if bad:
        raise CheckFailed(f"NGramLM(3, vocab, k=0.05): {len(bad)} of 200 unseen trigrams got probability 0, "
                          f"e.g. prob({bad[0][0]!r}, {bad[0][1]})")


@check(3, 1, "InterpolatedLM: mixture, log-probabilities, order, vocabulary, any number of models",
       uses=("InterpolatedLM",),
       hint="n is the largest order among the models (in any order), vocab the first model's; logprob is "
            "-math.inf where the mixture is 0; do not change the lists you are given.")
def interpolation_hidden(t):
    words = ["x", "y", "z"]
    tables = {n: random_table(t.rng, n, words) for n in (1, 2, 3)}
    for n, (_, table) in tables.items():  # no component allows "z" after "y": the mixture is 0 there
        for context, row in table.items():
            if n == 1 or context[-1] == "y":
                row["z"] = 0.0
                total = sum(row.values())
                row.update({w: p / total for w, p in row.items()})
    pairs = [(w, c) for w in words + ["</s>"] for c in [(), ("x",), ("y",), ("z", "y"), ("z", "x", "y"), ["x", "z"]]]
    for orders, lambdas in (((1, 2, 3), [0.2, 0.3, 0.5]), ((3, 1, 2), [0.5, 0.2, 0.3]), ((1, 3), [0.4, 0.6]),
                            ((2,), [1.0])):
        # every model after the first also knows a word of its own: vocab is the first model's, not the
        # last's, the largest order's or their union
        vocabs = [tables[n][0] + [f"only-in-model-{i}"] * (i > 0) for i, n in enumerate(orders)]
        local = [TableLM(n, v, tables[n][1]) for n, v in zip(orders, vocabs)]
        models = [t.student.support("TableLM", n, v, tables[n][1]) for n, v in zip(orders, vocabs)]
        weights = t.student.put(list(lambdas), "lambdas")
        lm = t.student.InterpolatedLM(models, weights)
        what = f"InterpolatedLM(models of orders {list(orders)}, {lambdas})"
        if weights.get() != lambdas:
            raise CheckFailed(f"{what} changed the list of weights it was given to {weights.get()}")
        if lm.n.get() != max(orders):
            raise CheckFailed(f"{what}: attribute n is {lm.n.get()!r}, expected {max(orders)} (the largest order)")
        vocab = lm.vocab.get()
        if not isinstance(vocab, (set, frozenset, list, tuple)) or set(vocab) != local[0].vocab:
            extra = sorted(set(vocab) - local[0].vocab) if isinstance(vocab, (set, frozenset, list, tuple)) else []
            raise CheckFailed(f"{what}: attribute vocab should be the first model's vocabulary "
                              f"({len(local[0].vocab)} words); got {vocab!r:.120}"
                              + (f", with {extra[0]!r} that only a later model knows" if extra else ""))
        expected = [sum(l * m.prob(w, c) for l, m in zip(lambdas, local)) for w, c in pairs]
        compare_pairs(lm.prob.map(pairs), expected, pairs, f"{what}.prob(word, context)", rtol=1e-9)
        compare_pairs(lm.logprob.map(pairs), [reference_logprob(p) for p in expected], pairs,
                      f"{what}.logprob(word, context)", rtol=0, atol=1e-9)


@check(3, 1, "tune_lambdas: lowest perplexity, first of ties, infinite perplexities, no side effects",
       uses=("tune_lambdas",), needs=("InterpolatedLM", "sentence_logprob", "perplexity"),
       hint="keep the first candidate with the lowest perplexity (a strict <), even when every candidate "
            "scores inf; return the candidate itself and leave the list of candidates alone.")
def tune_lambdas_hidden(t):
    words = ["x", "y", "z", "v"]
    tables = [random_table(t.rng, n, words) for n in (1, 2)]
    models = [t.student.support("TableLM", n, vocab, table) for n, (vocab, table) in zip((1, 2), tables)]
    local = [TableLM(n, vocab, table) for n, (vocab, table) in zip((1, 2), tables)]
    sentences = [[words[i] for i in t.rng.integers(0, 4, t.rng.integers(1, 8))] for _ in range(40)]
    candidates = [[round(a, 1), round(1 - a, 1)] for a in np.arange(0.1, 1.0, 0.1)]

    def ppl(lambdas, local=local, sentences=sentences):
        total = 0.0
        for s in sentences:
            for w, c in contexts_for(s, 2):
                p = sum(l * m.prob(w, c) for l, m in zip(lambdas, local))
                total += math.log(p) if p > 0 else -math.inf
        return perplexity_from_logprobs(total, sum(len(s) + 1 for s in sentences))

    best = min(candidates, key=ppl)
    got = pure(t, t.student.tune_lambdas, t.student.put(models, "models"), sentences, candidates,
                    what="tune_lambdas(models, sentences, candidates)")
    if not isinstance(got, (list, tuple)) or [float(x) for x in got] != best:
        raise CheckFailed(f"tune_lambdas(models, 40 sentences, 9 candidates) returned {got}, but {best} has lower "
                          f"perplexity ({ppl(best):.4f} vs {ppl(got) if got in candidates else float('nan'):.4f})")
    # ties and infinities: a unigram that never ends a sentence gives perplexity inf without the bigram
    vocab, table = tables[0]
    no_end = TableLM(1, vocab, {(): dict(table[()], **{"</s>": 0.0})})
    total = sum(v for w, v in no_end.table[()].items())
    no_end.table[()] = {w: v / total for w, v in no_end.table[()].items()}
    dead = t.student.support("TableLM", 1, vocab, no_end.table)
    dyadic = t.student.support("TableLM", 1, vocab, {(): {"x": 0.25, "y": 0.25, "z": 0.25, "v": 0.125, "</s>": 0.125}})
    for what, args, expected in (  # with dyadic numbers every mixture of two equal models is exactly equal
            ("two identical models: every candidate ties", ([dyadic, dyadic], sentences, [[0.25, 0.75], [0.5, 0.5], [0.75, 0.25]]), [0.25, 0.75]),
            ("only the last candidate has a finite perplexity", ([dead, models[1]], sentences, [[1.0, 0.0], [1.0, 0.0], [0.3, 0.7]]), [0.3, 0.7]),
            ("every candidate has perplexity inf", ([dead, dead], sentences, [[0.6, 0.4], [0.5, 0.5]]), [0.6, 0.4])):
        got = t.student.tune_lambdas(*args)
        if not isinstance(got, (list, tuple)) or [float(x) for x in got] != expected:
            raise CheckFailed(f"tune_lambdas(...) when {what}: returned {got!r}, expected {expected}")
    # perplexity weighs every token alike: one long sentence outweighs four short ones, which an average
    # over sentences (of their perplexities or their per-token log-probabilities) would favor instead
    tables = [{(): {"x": 0.75, "y": 0.125, "</s>": 0.125}}, {(): {"x": 0.25, "y": 0.25, "</s>": 0.5}}]
    local = [TableLM(1, ["x", "y", "</s>"], table) for table in tables]
    models = [t.student.support("TableLM", 1, ["x", "y", "</s>"], table) for table in tables]
    sentences = [["x"] * 24] + [["y"]] * 4
    candidates = [[0.25, 0.75], [0.75, 0.25], [0.5, 0.5]]
    scores = [ppl(lambdas, local, sentences) for lambdas in candidates]
    best = candidates[scores.index(min(scores))]
    got = t.student.tune_lambdas(models, sentences, candidates)
    if not isinstance(got, (list, tuple)) or [float(x) for x in got] != best:
        raise CheckFailed(f"tune_lambdas(two unigram models, [['x'] * 24] + [['y']] * 4, {candidates}) returned "
                          f"{got!r}, expected {best}: the perplexities of the whole text are "
                          f"{', '.join(f'{x:.4f}' for x in scores)}. Perplexity is over all tokens together, "
                          "exp(-(total log-probability) / (total tokens)), not an average over sentences.")


# ---- Q4 -------------------------------------------------------------------------------------
@check(4, 2, "sentence_logprob follows the chain rule (orders 1-4, <unk>, </s>, probability 0, natural log)",
       uses=("sentence_logprob",),
       hint="predict every token and then </s>; token i has context (<s>,) * (n-1) + tokens[:i]; use "
            "lm.logprob (a token of probability 0 makes the sum -inf); do not change `tokens`.")
def chain_rule(t):
    words = ["x", "y", "<unk>"]
    for n in (1, 2, 3, 4):
        vocab, table = random_table(t.rng, n, words)
        if n == 2:
            table[("y",)] = {"x": 0.5, "y": 0.0, "<unk>": 0.25, "</s>": 0.25}  # "y y" is impossible
        lm = t.student.support("TableLM", n, vocab, table, False)  # pad=False: a context without <s> shows
        local = TableLM(n, vocab, table, False)
        sentences = [[]] + [[words[i] for i in t.rng.integers(0, 3, t.rng.integers(1, 12))] for _ in range(30)]
        got = t.student.sentence_logprob.map([(lm, s) for s in sentences])
        expected = [table_sentence_logprob(local, s) for s in sentences]
        for s, g, e in zip(sentences, got, expected):
            if e == -math.inf and g != -math.inf:
                raise CheckFailed(f"sentence_logprob(order-{n} table model, {s}): got {g!r}, expected -inf "
                                  "(a token has probability 0)")
        finite = [i for i, e in enumerate(expected) if e != -math.inf]
        assert_close([got[i] for i in finite], [expected[i] for i in finite],
                     f"sentence_logprob(order-{n} table model, sentence)")
    sentence = ["x", "<unk>", "y"]
    pure(t, t.student.sentence_logprob, lm, sentence, what=f"sentence_logprob(lm, {sentence})")


@check(4, 1, "perplexity: value, token count with </s> and <unk>, infinity for probability 0, no side effects",
       uses=("perplexity",), needs=(),
       hint="each sentence predicts len(s) + 1 tokens, <unk> included; natural log goes with math.exp, not 2 **.")
def perplexity_hidden(t):
    words = ["x", "y", "<unk>"]
    vocab, table = random_table(t.rng, 2, words)
    local = TableLM(2, vocab, table)
    lm = t.student.support("TableLM", 2, vocab, table)
    sentences = [[words[i] for i in t.rng.integers(0, 3, t.rng.integers(0, 9))] for _ in range(25)]
    total = sum(table_sentence_logprob(local, s) for s in sentences)
    expected = perplexity_from_logprobs(total, sum(len(s) + 1 for s in sentences))
    got = pure(t, t.student.perplexity, lm, sentences, what="perplexity(bigram table model, 25 sentences)")
    assert_close(got, expected, "perplexity(bigram table model, 25 sentences with <unk>)")
    table[("x",)] = {"x": 0.0, "y": 0.5, "<unk>": 0.25, "</s>": 0.25}
    zero_lm = t.student.support("TableLM", 2, vocab, table)
    got = t.student.perplexity(zero_lm, [["y"], ["x", "x"]])
    if not (isinstance(got, float) and math.isinf(got) and got > 0):
        raise CheckFailed(f"perplexity(model, sentences) where one token has probability 0: expected inf, got {got!r}")


@check(4, 1, "perplexity is computed stably in log space (long texts)", uses=("perplexity",))
def perplexity_stable(t):
    words = [f"w{i}" for i in range(60)]
    lm = t.student.support("TableLM", 1, words + ["</s>"], {(): {w: 1 / 61 for w in words + ["</s>"]}})
    sentences = [[words[i] for i in t.rng.integers(0, 60, 400)] for _ in range(5)]  # 61**-2000 underflows
    got = t.student.perplexity(lm, sentences)
    assert_close(got, 61.0, "perplexity(uniform model over 61 words, 5 sentences of 400 tokens)")


# ---- Q5 -------------------------------------------------------------------------------------
@check(5, 1, "greedy generation: argmax, ties, orders 2 and 3, max_len, </s>, <unk>, default max_len",
       uses=("generate",),
       hint="on ties take the first word of sorted(lm.vocab); stop at </s> (not included) or after max_len tokens; "
            "the context grows by every word you emit.")
def greedy_hidden(t):
    words = ["x", "y", "z"]
    vocab, table = random_table(t.rng, 2, words)
    table[("<s>",)] = {"x": 0.1, "y": 0.4, "z": 0.4, "</s>": 0.1}  # a tie: y comes first in sorted order
    table[("y",)] = {"x": 0.1, "y": 0.6, "z": 0.2, "</s>": 0.1}  # y y y ... until max_len
    lm = t.student.support("TableLM", 2, vocab, table, False)  # pad=False: a start without <s> shows
    for max_len in (0, 1, 7):
        assert_equal(t.student.generate(lm, max_len, True), ["y"] * max_len, f"generate(lm, max_len={max_len}, greedy=True)")
    assert_equal(t.student.generate(lm, greedy=True), ["y"] * 20, "generate(lm, greedy=True) (the default max_len is 20)")
    table[("y",)] = {"x": 0.1, "y": 0.1, "z": 0.2, "</s>": 0.6}
    table[("</s>",)] = {"x": 0.1, "y": 0.1, "z": 0.7, "</s>": 0.1}  # what follows </s> must never matter
    lm = t.student.support("TableLM", 2, vocab, table)
    assert_equal(t.student.generate(lm, max_len=7, greedy=True), ["y"],
                 "generate(lm, max_len=7, greedy=True) with </s> most likely after y")
    vocab, table = random_table(t.rng, 3, words)
    for context, row in table.items():  # a trigram table whose greedy path needs both context words
        row.update({"</s>": 0.0})
        best = {("<s>", "<s>"): "x", ("<s>", "x"): "z", ("x", "z"): "x", ("z", "x"): "y", ("x", "y"): "</s>"}.get(context)
        if best:
            row.update({w: 0.05 for w in row}, **{best: 0.85})
    lm = t.student.support("TableLM", 3, vocab, table, False)
    assert_equal(t.student.generate(lm, 10, True), ["x", "z", "x", "y"],
                 "generate(trigram table model, 10, greedy=True); the first context is ('<s>', '<s>')")
    # a tie at every step, between neighbours in sorted order (</s> < <unk> < a < b < c < d): only sorted(vocab)
    # resolves them all as the docstring says, not the order a set happens to iterate in (it changes with the
    # worker's hash seed); two vocabularies, so that a set order that happens to be sorted for one is not for both
    for a, b, c, d in ("abcd", "pqrs"):
        chain = {("<s>",): (a, b), (a,): (b, c), (b,): (c, d), (c,): ("<unk>", a), ("<unk>",): ("</s>", "<unk>")}
        ties = {context: {w: 0.4 if w in pair else 0.05 for w in [a, b, c, d, "<unk>", "</s>"]}
                for context, pair in chain.items()}
        lm = t.student.support("TableLM", 2, [d, c, b, a, "<unk>", "</s>"], ties)
        assert_equal(t.student.generate(lm, 10, True), [a, b, c, "<unk>"],
                     "generate(lm, 10, greedy=True) where two words tie at every step (P = 0.4 each): take the first "
                     "of words = sorted(lm.vocab), not of lm.vocab itself (a set has no fixed order)")
    unk = {("<s>",): {"x": 0.2, "<unk>": 0.5, "</s>": 0.3}, ("<unk>",): {"x": 0.6, "<unk>": 0.1, "</s>": 0.3},
           ("x",): {"x": 0.1, "<unk>": 0.2, "</s>": 0.7}}
    lm = t.student.support("TableLM", 2, ["x", "<unk>", "</s>"], unk)
    assert_equal(t.student.generate(lm, 10, True), ["<unk>", "x"],
                 "generate(lm, 10, greedy=True) where <unk> is the likeliest first word (<unk> is a word of the "
                 "vocabulary like any other: do not skip it)")
    # words that sort before "</s>" (punctuation, digits) are words like any other: only "</s>" stops
    # (found by `lmgrade mutants ngram`: `word <= "</s>"` passed every check)
    marks = {("<s>",): {",": 0.7, "!": 0.1, "1": 0.1, "</s>": 0.1}, (",",): {",": 0.1, "!": 0.6, "1": 0.2, "</s>": 0.1},
             ("!",): {",": 0.1, "!": 0.1, "1": 0.7, "</s>": 0.1}, ("1",): {",": 0.1, "!": 0.1, "1": 0.1, "</s>": 0.7}}
    lm = t.student.support("TableLM", 2, [",", "!", "1", "</s>"], marks)
    assert_equal(t.student.generate(lm, 10, True), [",", "!", "1"],
                 "generate(lm, 10, greedy=True) over the words ',', '!' and '1', which sort before '</s>' "
                 "(stop at the word \"</s>\" itself, not at words that compare below it)")


SAMPLE_WORDS = ["a", "b", "c", "d", "<unk>"]  # <unk> is a word like any other: a sampler that skips it shows
SAMPLE_TABLE = {  # every row different, so a sampler that keeps or loses the context shows
    ("<s>",): {"a": 0.4, "b": 0.25, "c": 0.1, "d": 0.08, "<unk>": 0.12, "</s>": 0.05},
    ("a",): {"a": 0.08, "b": 0.35, "c": 0.2, "d": 0.12, "<unk>": 0.05, "</s>": 0.2},
    ("b",): {"a": 0.25, "b": 0.08, "c": 0.1, "d": 0.32, "<unk>": 0.05, "</s>": 0.2},
    ("c",): {"a": 0.1, "b": 0.2, "c": 0.35, "d": 0.1, "<unk>": 0.05, "</s>": 0.2},
    ("d",): {"a": 0.2, "b": 0.1, "c": 0.25, "d": 0.1, "<unk>": 0.05, "</s>": 0.3},
    ("<unk>",): {"a": 0.15, "b": 0.3, "c": 0.1, "d": 0.2, "<unk>": 0.1, "</s>": 0.15},
    ("</s>",): {"a": 0.89, "b": 0.04, "c": 0.03, "d": 0.02, "<unk>": 0.01, "</s>": 0.01},
}


@check(5, 2, "sampled generation: whole sequences follow the model (<unk> too), stop at </s>, reproducible by seed",
       uses=("generate",),
       hint="make random.Random(seed) once per call (not per word); draw every word with "
            "rng.choices(words, weights=probs)[0] from the current context; stop at </s>.")
def sampling_hidden(t):
    lm = t.student.support("TableLM", 2, SAMPLE_WORDS + ["</s>"], SAMPLE_TABLE)
    n, max_len = 2000, 6
    outputs = t.student.generate.map([(lm, max_len, False, seed) for seed in range(n)])
    transition_test(outputs, max_len, SAMPLE_TABLE, f"generate(lm, max_len={max_len}, seed=s) for {n} seeds",
                    false_fail=FALSE_FAIL)
    properties.run_generator(t, "generate", t.student.generate, "lm, max_len=15, seed=3", (lm, 15, False, 3))
    for seed in (3, 11):
        again = call_twice(t.student.generate, lm, max_len=15, seed=seed, what=f"generate(lm, max_len=15, seed={seed})")
        if t.student.generate(lm, 15, False, seed) != again:
            raise CheckFailed(f"generate(lm, 15, False, {seed}) and generate(lm, max_len=15, seed={seed}) differ: "
                              "greedy must default to False")
    if len(set(map(tuple, outputs[:50]))) < 10:
        raise CheckFailed("generate(..., seed=s) gives (almost) the same output for different seeds")
    unseeded = t.student.generate.map([(lm, 15)] * 8)  # a correct sampler repeats itself with probability < 1e-7
    if len({repr(out) for out in unseeded}) < 2:
        raise CheckFailed(f"generate(lm, max_len=15) called 8 times without a seed returned {unseeded[0]!r:.80} every "
                          "time. The default is seed=None, and random.Random(None) seeds itself afresh, so the "
                          "sentences should differ: is the default seed a fixed number?")


# ---- Q6 -------------------------------------------------------------------------------------
@reference_result("shakespeare_tokens")
def shakespeare_reference_tokens(ref) -> dict:
    """The staff model's log-probability of every test and validation token (grader side, cached)."""
    train, validation, test = shakespeare_splits(ref)
    model = ref.build_model(train, validation)
    return {name: [[model.logprob(w, c) for w, c in contexts_for(s, model.n)] for s in split]
            for name, split in (("test", test), ("validation", validation))}


@check(6, 3, "held-out perplexity on unseen Shakespeare plays, from whole next-word distributions", timeout=240,
       uses=("build_model",), needs=Q6_NEEDS)
def shakespeare_heldout(t):
    train, validation, test = shakespeare_splits(t.ref)
    reference = t.cached("shakespeare_tokens", lambda: shakespeare_reference_tokens(t.ref))
    words = sorted(t.ref.build_vocab(train, 1))
    rng = np.random.default_rng(secret_seed(t, "shakespeare"))
    plans = (plan_positions(test, ROUNDS[-1], rng), plan_positions(validation, ROUNDS[-1] // 2, rng))
    lm = t.student.build_model(train, validation)
    n = model_order(lm)
    pairs = [(words[i], context_at(validation[s], p, n)) for i, (s, p, _) in
             zip(rng.integers(0, len(words), 60), plans[1].later[-60:])]
    assert_prob_logprob_agree(lm, pairs, "build_model's model")
    scorer = Scorer(t, lm, n, words, "build_model's model: prob(w, context) for w in build_vocab(train, 1)",
                    batch=8, rng=rng)
    for m in ROUNDS:
        plan, validation_plan = plans[0].prefix(m), plans[1].prefix(m // 2)
        # validation first: until the model sees held-out text, a failure can name the context and figures
        validation_logprobs = scorer.logprobs(validation, validation_plan, held_out=False)
        if judge(t, f"Your order-{n} model on the test plays", plan, scorer.logprobs(test, plan, held_out=True),
                 [reference["test"][s][i] for s, i in plan.positions], validation_plan, validation_logprobs,
                 [reference["validation"][s][i] for s, i in validation_plan.positions], last=m == ROUNDS[-1]):
            break


@check(6, 2, "synthetic language: near the threshold and never below the entropy floor", timeout=240,
       uses=("build_model",), needs=Q6_NEEDS)
def synthetic_floor(t):
    language, train, validation, heldout = synthetic_texts(secret_seed(t, "synthetic"))
    rng = np.random.default_rng(secret_seed(t, "synthetic plan"))
    plans = (plan_positions(heldout, None, rng), plan_positions(validation, None, rng))
    words = sorted(t.ref.build_vocab(train, 1))
    lm = call_pure(t.student.build_model, train, validation, what="build_model(train, validation)")
    n = model_order(lm)
    pairs = [(words[i], context_at(validation[s], p, n)) for i, (s, p, _) in
             zip(rng.integers(0, len(words), 60), plans[1].later[-60:])]
    assert_prob_logprob_agree(lm, pairs, "build_model's model")
    scorer = Scorer(t, lm, n, words, "build_model's model on synthetic text: prob(w, context) for w in "
                    "build_vocab(train, 1)", batch=64, rng=rng)
    validation_logprobs = scorer.logprobs(validation, plans[1], held_out=False)  # first: its failures are shown
    student = [scorer.logprobs(heldout, plans[0], held_out=True), validation_logprobs]
    staff_model = t.ref.build_model(train, validation)
    staff = [[staff_model.logprob(target_at(text[s], i), context_at(text[s], i, staff_model.n)) for s, i in plan.positions]
             for text, plan in zip((heldout, validation), plans)]
    floor = [language.token_logprobs(heldout[s])[i] for s, i in plans[0].positions]
    judge(t, f"Your order-{n} model on fresh synthetic text", plans[0], student[0], staff[0], plans[1], student[1],
          staff[1], last=True, floor_logprobs=floor)


# ---- Q7 -------------------------------------------------------------------------------------
@check(7, 2, "Kneser-Ney bigram: probabilities, log-probabilities, other discounts, normalization", extra=True,
       uses=("KneserNeyLM",), needs=COUNT_NEEDS)
def kneser_ney_hidden(t):
    corpus = random_corpus(t.rng, 200, 30)
    vocab = t.ref.build_vocab(corpus, 1) | {"w-never"}  # never follows anything: P_cont = 0
    words = sorted(vocab)
    for discount in (0.75, 0.4):
        pairs = _pairs(t.rng, corpus, vocab, 2, as_lists=True) + [("w-never", ("w0",)), ("w-never", ())]
        ref_lm = t.ref.KneserNeyLM(vocab, discount).fit(corpus)
        keywords = {} if discount == 0.75 else {"discount": discount}  # the default, then the keyword
        lm = fitted(t, t.student.KneserNeyLM, (vocab,), corpus, f"KneserNeyLM(vocab, {discount})", **keywords)
        if lm.n.get() != 2:
            raise CheckFailed(f"KneserNeyLM: attribute n is {lm.n.get()!r}, expected 2")
        expected = [ref_lm.prob(w, c) for w, c in pairs]
        compare_pairs(lm.prob.map(pairs), expected, pairs, f"KneserNeyLM(vocab, {discount}).prob(word, context)")
        compare_pairs(lm.logprob.map(pairs), [reference_logprob(p) for p in expected], pairs,
                      f"KneserNeyLM(vocab, {discount}).logprob(word, context)", rtol=0, atol=1e-6)
        contexts = [("w0",), ("w7",), ("<s>",), ("never-seen",), ()]
        rows = t.student.support("NextWordProbe", lm, words).distributions(contexts)
        check_distributions(rows, contexts, len(words), f"KneserNeyLM(vocab, {discount}): prob(w, context) for w in vocab")
