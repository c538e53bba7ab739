"""Hidden checks for `ngram`. Never shipped to students.

Each question is graded on its own where possible: Q4 and Q5 use grader-made table models
(`autograder/support.py`), so a bug in the student's Q3 classes costs only Q3 (and Q6, which by
design scores the student's whole pipeline).
"""
import math
from functools import lru_cache

import numpy as np

from autograder.checks import check
from autograder.compare import assert_close, assert_equal
from autograder.errors import CheckFailed
from autograder.perplexity import assert_perplexity, perplexity_from_logprobs
from autograder.support import TableLM, random_sentences

PPL_MARGIN = 0.10  # Q6 thresholds: the reference's perplexity plus 10% (bench/ngram_thresholds.py)
TRICKY_LINES = [
    "", "   ", "O'er the hills--and far away!", "'Tis NOT so; 'twas\tthen.", "I'll o'er-leap it,",
    "Ha, ha, ha! HA!", "In 1599, 2s. 2d. paid", '"Hark!" quoth he', "lovers' eyes", "rock'n'roll'd",
    "don't, won't... can't?", "a  b\n c", "What's in a name?", "MACBETH. [Aside] Two truths",
]


# ---- helpers: random data the trusted side builds ---------------------------------------------
def random_corpus(rng, n_sentences: int, vocab_size: int, max_len: int = 12) -> list[list[str]]:
    """Zipf-like words so that some n-grams repeat and others are rare; some empty sentences."""
    weights = 1.0 / np.arange(1, vocab_size + 1)
    weights /= weights.sum()
    words = [f"w{i}" for i in range(vocab_size)]
    lengths = rng.integers(0, max_len + 1, n_sentences)
    return [[words[j] for j in rng.choice(vocab_size, size=n, p=weights)] for n in lengths]


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
    history = ["<s>"] * max(n - 1, 0) + list(sentence)
    out = []
    for i, word in enumerate(list(sentence) + ["</s>"]):
        context = tuple(history[:max(n - 1, 0) + i])
        out.append((word, context[len(context) - (n - 1):] if n > 1 else ()))
    return out


def table_sentence_logprob(lm: TableLM, sentence) -> float:
    return sum(lm.logprob(w, c) for w, c in contexts_for(sentence, lm.n))


def model_perplexity(t, lm, sentences) -> tuple[float, int]:
    """Perplexity computed by the grader from a model's logprob: the student's (a Remote, one round
    trip for all tokens) or the reference's (a local object, when `t` is None)."""
    if t is None:
        total = sum(lm.logprob(w, c) for s in sentences for w, c in contexts_for(s, lm.n))
        return perplexity_from_logprobs(total, sum(len(s) + 1 for s in sentences)), lm.n
    n = lm.n.get()
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 10:
        raise CheckFailed(f"the model's attribute n should be an int between 1 and 10, got {n!r}")
    calls = [pair for s in sentences for pair in contexts_for(s, n)]
    logps = lm.logprob.map(calls, timeout=120)
    values = np.array([float(x) for x in logps], dtype=np.float64)
    if np.isnan(values).any():
        raise CheckFailed("logprob returned NaN for some held-out tokens")
    return perplexity_from_logprobs(float(values.sum()), len(calls)), n


def assert_normalized(lm, sentences, n: int) -> None:
    """A perplexity means nothing unless probabilities sum to 1: check a few contexts of the data."""
    vocab = sorted(lm.vocab.get())
    for _, context in [contexts_for(s, n)[min(2, len(s))] for s in sentences[:3]]:
        total = float(np.sum(np.asarray(lm.prob.map([(w, context) for w in vocab], timeout=120), dtype=np.float64)))
        if not abs(total - 1.0) <= 1e-6:
            raise CheckFailed(f"build_model's model: prob(w, {context}) summed over its {len(vocab)} vocabulary words is "
                              f"{total:.6f}, not 1, so its perplexity is meaningless. Check the interpolation weights "
                              "(they must sum to 1) and the smoothing denominators.")


@lru_cache(maxsize=1)
def shakespeare_splits(ref) -> tuple:
    """Tokenized verse, OOV-replaced with a min_count=2 train vocabulary (the grader's, not the student's)."""
    from autograder.data import shakespeare
    tokenized = {s: [ref.tokenize(line) for line in shakespeare.lines(s)] for s in shakespeare.SPLITS}
    vocab = ref.build_vocab(tokenized["train"], 2)
    return tuple([ref.replace_oov(s, vocab) for s in tokenized[split]] for split in shakespeare.SPLITS)


def reference_perplexity(ref, train, validation, heldout) -> float:
    return model_perplexity(None, ref.build_model(train, validation), heldout)[0]


# ---- Q1 -------------------------------------------------------------------------------------
@check(1, 1, "tokenize: punctuation, apostrophes, case, digits, real lines")
def tokenize_hidden(t):
    from autograder.data import shakespeare
    lines = shakespeare.lines("validation")
    picks = [lines[i] for i in t.rng.choice(len(lines), 300, replace=False)]
    got = t.student.tokenize.map([(line,) for line in TRICKY_LINES + picks])
    for line, g in zip(TRICKY_LINES + picks, got):
        assert_equal(g, t.ref.tokenize(line), f"tokenize({line!r})")


@check(1, 1, "build_vocab and replace_oov on random corpora")
def vocab_hidden(t):
    corpus = random_corpus(t.rng, 200, 80) + [["<s>", "w1"], ["<s>", "w2"]]
    for min_count in (1, 3):
        vocab = t.student.build_vocab(corpus, min_count)
        assert_equal(vocab, t.ref.build_vocab(corpus, min_count), f"build_vocab(corpus of 202 sentences, min_count={min_count})")
    vocab = t.ref.build_vocab(corpus, 3)
    sentence = corpus[0] + ["never-seen", "w79"]
    assert_equal(t.student.replace_oov(sentence, vocab), t.ref.replace_oov(sentence, vocab), "replace_oov(sentence, vocab)")


# ---- Q2 -------------------------------------------------------------------------------------
@check(2, 2, "count_ngrams: exact counts on a small case, orders 1-4",
       hint="pad each sentence on its own (n-1 <s>, one </s>): a sentence of m tokens gives m+1 n-grams, "
            "even when m is 0.")
def counts_exact(t):
    sentences = [["a", "a", "a"], ["b"], [], ["a", "b", "a", "b"]]
    for n in (1, 2, 3, 4):
        assert_equal(t.student.count_ngrams(sentences, n), t.ref.count_ngrams(sentences, n),
                     f"count_ngrams([['a','a','a'], ['b'], [], ['a','b','a','b']], {n})")


@check(2, 1, "count_ngrams on a random corpus")
def counts_random(t):
    corpus = random_corpus(t.rng, 300, 40)
    for n in (2, 3):
        assert_equal(t.student.count_ngrams(corpus, n), t.ref.count_ngrams(corpus, n), f"count_ngrams(corpus, {n})")


@check(2, 1, "count_ngrams counts 1M tokens within 30 s", timeout=30)
def counts_speed(t):
    args = (t.seed, 50_000, 20, 30)  # 1M tokens over 30 words, made in the student's process
    got = t.student.count_ngrams(t.student.support("random_sentences", *args), 3)
    expected = t.ref.count_ngrams(random_sentences(*args), 3)
    if sum(got.values()) != sum(expected.values()):
        raise CheckFailed(f"count_ngrams(1M tokens, 3): total count {sum(got.values())}, expected {sum(expected.values())}")
    assert_equal(got, expected, "count_ngrams(1M tokens, 3)")


# ---- Q3 -------------------------------------------------------------------------------------
def _pairs(rng, corpus, vocab, n):
    """(word, context) pairs from seen contexts, unseen contexts, short and long contexts."""
    words = sorted(vocab)
    pairs = []
    for s in corpus[:40]:
        pairs += contexts_for(s, n)
    for _ in range(60):
        length = int(rng.integers(0, n + 2))
        pairs.append((words[rng.integers(len(words))], tuple(words[rng.integers(len(words))] for _ in range(length))))
    pairs.append(("w0", ("never", "seen")))
    return pairs


@check(3, 1, "NGramLM MLE probabilities (orders 1-3, seen and unseen contexts)",
       hint="use only the last n-1 context tokens, left-padded with <s>; an unseen context gives 0.0.")
def mle_hidden(t):
    corpus = random_corpus(t.rng, 150, 30)
    vocab = t.ref.build_vocab(corpus, 1)
    for n in (1, 2, 3):
        pairs = _pairs(t.rng, corpus, vocab, n)
        ref_lm = t.ref.NGramLM(n, vocab, 0.0).fit(corpus)
        got = t.student.NGramLM(n, vocab, 0.0).fit(corpus).prob.map(pairs)
        assert_close(got, [ref_lm.prob(w, c) for w, c in pairs], f"NGramLM({n}, vocab, k=0).prob(word, context)")


@check(3, 1, "NGramLM add-k probabilities")
def addk_hidden(t):
    corpus = random_corpus(t.rng, 150, 30)
    vocab = t.ref.build_vocab(corpus, 2)
    corpus = [t.ref.replace_oov(s, vocab) for s in corpus]
    for n, k in ((1, 1.0), (2, 0.01), (3, 0.5)):
        pairs = _pairs(t.rng, corpus, vocab, n)
        ref_lm = t.ref.NGramLM(n, vocab, k).fit(corpus)
        got = t.student.NGramLM(n, vocab, k).fit(corpus).prob.map(pairs)
        assert_close(got, [ref_lm.prob(w, c) for w, c in pairs], f"NGramLM({n}, vocab, k={k}).prob(word, context)")


@check(3, 2, "probabilities over the vocabulary sum to 1 (seen and unseen contexts)",
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
        for context in contexts:
            total = sum(float(p) for p in lm.prob.map([(w, context) for w in words]))
            if not abs(total - 1.0) <= 1e-6:
                raise CheckFailed(f"NGramLM({n}, vocab, k={k}): sum of prob(w, {context}) over the {len(words)} "
                                  f"vocabulary words is {total:.9f}, not 1. Check the denominator "
                                  "(for add-k it needs k times the vocabulary size) and the padding.")


@check(3, 1, "add-k gives every unseen n-gram nonzero probability")
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


@check(3, 1, "InterpolatedLM mixes its models' probabilities")
def interpolation_hidden(t):
    words = ["x", "y", "z"]
    tables = [random_table(t.rng, n, words) for n in (1, 2, 3)]
    models = [t.student.support("TableLM", n, vocab, table) for n, (vocab, table) in zip((1, 2, 3), tables)]
    local = [TableLM(n, vocab, table) for n, (vocab, table) in zip((1, 2, 3), tables)]
    lambdas = [0.2, 0.3, 0.5]
    lm = t.student.InterpolatedLM(models, lambdas)
    if lm.n.get() != 3:
        raise CheckFailed(f"InterpolatedLM of orders 1, 2, 3: attribute n is {lm.n.get()!r}, expected 3")
    pairs = [(w, c) for w in words + ["</s>"] for c in [(), ("x",), ("y", "z"), ("z", "x", "y")]]
    expected = [sum(l * m.prob(w, c) for l, m in zip(lambdas, local)) for w, c in pairs]
    assert_close(lm.prob.map(pairs), expected, "InterpolatedLM(models, [0.2, 0.3, 0.5]).prob(word, context)")
    assert_close(lm.logprob.map(pairs), np.log(expected), "InterpolatedLM(...).logprob(word, context)")


@check(3, 1, "tune_lambdas returns the candidate with the lowest perplexity")
def tune_lambdas_hidden(t):
    words = ["x", "y", "z", "v"]
    tables = [random_table(t.rng, n, words) for n in (1, 2)]
    models = [t.student.support("TableLM", n, vocab, table) for n, (vocab, table) in zip((1, 2), tables)]
    local = [TableLM(n, vocab, table) for n, (vocab, table) in zip((1, 2), tables)]
    sentences = [[words[i] for i in t.rng.integers(0, 4, t.rng.integers(1, 8))] for _ in range(40)]
    candidates = [[round(a, 1), round(1 - a, 1)] for a in np.arange(0.1, 1.0, 0.1)]

    def ppl(lambdas):
        total = sum(math.log(sum(l * m.prob(w, c) for l, m in zip(lambdas, local)))
                    for s in sentences for w, c in contexts_for(s, 2))
        return perplexity_from_logprobs(total, sum(len(s) + 1 for s in sentences))

    best = min(candidates, key=ppl)
    got = t.student.tune_lambdas(models, sentences, candidates)
    if [float(x) for x in got] != best:
        raise CheckFailed(f"tune_lambdas(models, 40 sentences, 9 candidates) returned {got}, but {best} has lower "
                          f"perplexity ({ppl(best):.4f} vs {ppl(got) if got in candidates else float('nan'):.4f})")


# ---- Q4 -------------------------------------------------------------------------------------
@check(4, 2, "sentence_logprob follows the chain rule (with </s>, natural log)",
       hint="predict every token and then </s>; token i has context (<s>,) * (n-1) + tokens[:i].")
def chain_rule(t):
    words = ["x", "y", "z"]
    vocab, table = random_table(t.rng, 3, words)
    lm = t.student.support("TableLM", 3, vocab, table)
    local = TableLM(3, vocab, table)
    sentences = [[]] + [[words[i] for i in t.rng.integers(0, 3, t.rng.integers(1, 12))] for _ in range(30)]
    got = t.student.sentence_logprob.map([(lm, s) for s in sentences])
    assert_close(got, [table_sentence_logprob(local, s) for s in sentences],
                 "sentence_logprob(trigram table model, sentence)")


@check(4, 1, "perplexity: value, token count with </s>, and infinity for probability 0",
       hint="each sentence predicts len(s) + 1 tokens; natural log goes with math.exp, not 2 **.")
def perplexity_hidden(t):
    words = ["x", "y", "z"]
    vocab, table = random_table(t.rng, 2, words)
    local = TableLM(2, vocab, table)
    lm = t.student.support("TableLM", 2, vocab, table)
    sentences = [[words[i] for i in t.rng.integers(0, 3, t.rng.integers(0, 9))] for _ in range(25)]
    total = sum(table_sentence_logprob(local, s) for s in sentences)
    expected = perplexity_from_logprobs(total, sum(len(s) + 1 for s in sentences))
    assert_close(t.student.perplexity(lm, sentences), expected, "perplexity(bigram table model, 25 sentences)")
    table[("x",)] = {"x": 0.0, "y": 0.5, "z": 0.25, "</s>": 0.25}
    zero_lm = t.student.support("TableLM", 2, vocab, table)
    got = t.student.perplexity(zero_lm, [["y"], ["x", "x"]])
    if not (isinstance(got, float) and math.isinf(got) and got > 0):
        raise CheckFailed(f"perplexity(model, sentences) where one token has probability 0: expected inf, got {got!r}")


@check(4, 1, "perplexity is computed stably in log space (long texts)")
def perplexity_stable(t):
    words = [f"w{i}" for i in range(60)]
    lm = t.student.support("TableLM", 1, words + ["</s>"], {(): {w: 1 / 61 for w in words + ["</s>"]}})
    sentences = [[words[i] for i in t.rng.integers(0, 60, 400)] for _ in range(5)]  # 61**-2000 underflows
    got = t.student.perplexity(lm, sentences)
    assert_close(got, 61.0, "perplexity(uniform model over 61 words, 5 sentences of 400 tokens)")


# ---- Q5 -------------------------------------------------------------------------------------
@check(5, 1, "greedy generation: argmax, ties, max_len and </s>",
       hint="on ties take the first word of sorted(lm.vocab); stop at </s> (not included) or after max_len tokens.")
def greedy_hidden(t):
    words = ["x", "y", "z"]
    vocab, table = random_table(t.rng, 2, words)
    table[("<s>",)] = {"x": 0.1, "y": 0.4, "z": 0.4, "</s>": 0.1}  # a tie: y comes first in sorted order
    table[("y",)] = {"x": 0.1, "y": 0.6, "z": 0.2, "</s>": 0.1}  # y y y ... until max_len
    lm = t.student.support("TableLM", 2, vocab, table)
    for max_len in (1, 7):
        assert_equal(t.student.generate(lm, max_len, True), ["y"] * max_len, f"generate(lm, max_len={max_len}, greedy=True)")
    table[("y",)] = {"x": 0.1, "y": 0.1, "z": 0.2, "</s>": 0.6}
    lm = t.student.support("TableLM", 2, vocab, table)
    assert_equal(t.student.generate(lm, 7, True), ["y"], "generate(lm, max_len=7, greedy=True) with </s> most likely after y")


@check(5, 2, "sampled generation follows the model's distribution and is reproducible by seed")
def sampling_hidden(t):
    words = ["a", "b", "c", "d"]
    probs = {"a": 0.45, "b": 0.3, "c": 0.15, "d": 0.07, "</s>": 0.03}
    table = {(w,): {"a": 0.2, "b": 0.2, "c": 0.2, "d": 0.2, "</s>": 0.2} for w in words}
    table[("<s>",)] = probs
    lm = t.student.support("TableLM", 2, words + ["</s>"], table)
    n = 3000
    outputs = t.student.generate.map([(lm, 1, False, seed) for seed in range(n)])
    firsts = [o[0] if o else "</s>" for o in outputs]
    observed = np.array([firsts.count(w) for w in probs], dtype=float)
    expected = np.array(list(probs.values())) * n
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    if chi2 > 33.4:  # chi-square, 4 degrees of freedom, p = 1e-6: a correct sampler fails once in a million
        shares = ", ".join(f"{w}: {o / n:.3f} (model {p})" for (w, p), o in zip(probs.items(), observed))
        raise CheckFailed(f"generate(lm, max_len=1, seed=s) for {n} seeds: first words do not follow the model "
                          f"(chi-square {chi2:.1f}); observed shares {shares}. Sample with the probabilities, "
                          "using random.Random(seed).")
    calls = [(lm, 15, False, seed) for seed in range(7, 17)]
    first, second = t.student.generate.map(calls), t.student.generate.map(calls)
    if first != second:
        seed = next(c[3] for c, a, b in zip(calls, first, second) if a != b)
        raise CheckFailed(f"generate(lm, 15, greedy=False, seed={seed}) gave different outputs on two calls: "
                          "draw from random.Random(seed), not from the global random module")
    if len(set(map(tuple, outputs[:50]))) < 3:
        raise CheckFailed("generate(..., seed=s) gives (almost) the same output for different seeds")
    long = t.student.generate.map([(lm, 5, False, seed) for seed in range(50)])
    if any(len(o) > 5 or "</s>" in o or "<s>" in o for o in long):
        raise CheckFailed("generate(lm, max_len=5, seed=s): an output is longer than 5 or contains <s> or </s>")


# ---- Q6 -------------------------------------------------------------------------------------
@check(6, 3, "held-out perplexity on unseen Shakespeare plays", timeout=240)
def shakespeare_heldout(t):
    train, validation, test = shakespeare_splits(t.ref)
    threshold = t.cached("shakespeare", lambda: reference_perplexity(t.ref, train, validation, test)) * (1 + PPL_MARGIN)
    lm = t.student.build_model(train, validation)
    ppl, n = model_perplexity(t, lm, test)
    assert_normalized(lm, test, n)
    t.note(assert_perplexity(ppl, threshold, f"Your order-{n} model on the test plays"))


@lru_cache(maxsize=1)
def synthetic_data(ref) -> tuple:
    """The synthetic language, its training text and the reference model trained on it."""
    from autograder.data.synthetic import HiddenMarkovLanguage
    language = HiddenMarkovLanguage.random(seed=1234)
    train, validation = language.sample(20_000, seed=1), language.sample(2_000, seed=2)
    return language, train, validation, ref.build_model(train, validation)


@check(6, 2, "synthetic language: near the threshold and never below the entropy floor", timeout=240)
def synthetic_floor(t):
    language, train, validation, reference = synthetic_data(t.ref)
    heldout = language.sample(3_000, seed=t.submission_seed)  # fresh for each submission; never shipped
    floor = language.perplexity(heldout)
    threshold = model_perplexity(None, reference, heldout)[0] * (1 + PPL_MARGIN)
    lm = t.student.build_model(train, validation)
    ppl, n = model_perplexity(t, lm, heldout)
    t.note(assert_perplexity(ppl, threshold, f"Your order-{n} model on fresh synthetic text", floor=floor))


# ---- Q7 -------------------------------------------------------------------------------------
@check(7, 2, "Kneser-Ney bigram probabilities and normalization", extra=True)
def kneser_ney_hidden(t):
    corpus = random_corpus(t.rng, 200, 30)
    vocab = t.ref.build_vocab(corpus, 1)
    pairs = _pairs(t.rng, corpus, vocab, 2)
    ref_lm = t.ref.KneserNeyLM(vocab, 0.75).fit(corpus)
    lm = t.student.KneserNeyLM(vocab, 0.75).fit(corpus)
    assert_close(lm.prob.map(pairs), [ref_lm.prob(w, c) for w, c in pairs], "KneserNeyLM(vocab, 0.75).prob(word, context)")
    for context in [("w0",), ("w7",), ("<s>",), ("never-seen",)]:
        total = sum(float(p) for p in lm.prob.map([(w, context) for w in sorted(vocab)]))
        if not abs(total - 1) <= 1e-6:
            raise CheckFailed(f"KneserNeyLM: probabilities after {context} sum to {total:.9f}, not 1")
