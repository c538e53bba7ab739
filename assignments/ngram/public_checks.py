"""Public checks for `ngram`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: saved fixtures recorded from the reference by
`lmgrade build`, so these checks also run where the reference is not available. The inputs are
picked to show the commonest bugs (a word that reaches min_count only inside one sentence, a
context never seen, a tie in greedy decoding, a function that changes its argument).
"""
import math

from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_equal
from autograder.checking.perplexity import check_distributions, transition_test
from autograder.checking.purity import call_pure, call_twice
from autograder.errors import CheckFailed

LINES = ["Why, 'tis the KING's!", "O Romeo, Romeo! wherefore art thou Romeo?", "  Exit, pursued by a bear.  ",
         "In 1599--at eight o'clock."]
TOY = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "saw", "the", "dog"]]
TOY_VOCAB = {"the", "cat", "sat", "dog", "a", "saw", "</s>", "<unk>"}
# A bigram model given by a table, so that Q4 and Q5 do not depend on your Q3 classes.
TABLE_VOCAB = ["a", "b", "</s>"]
TABLE = {("<s>",): {"a": 0.6, "b": 0.3, "</s>": 0.1},
         ("a",): {"a": 0.1, "b": 0.7, "</s>": 0.2},
         ("b",): {"a": 0.2, "b": 0.1, "</s>": 0.7}}
UNIGRAM = {(): {"a": 0.5, "b": 0.25, "</s>": 0.25}}


def logs(probs):
    return [math.log(p) if p > 0 else -math.inf for p in probs]


@check(1, 1, "tokenize on example lines", public=True, uses=("tokenize",))
def public_tokenize(t):
    for line in LINES:
        assert_equal(t.student.tokenize(line), t.expected(line, lambda ref: ref.tokenize(line)), f"tokenize({line!r})")


@check(1, 1, "build_vocab and replace_oov on a toy corpus", public=True, uses=("build_vocab", "replace_oov"))
def public_vocab(t):
    got = call_pure(t.student.build_vocab, TOY, 2, what="build_vocab(toy, 2)")
    assert_equal(got, t.expected("vocab", lambda ref: ref.build_vocab(TOY, 2)), "build_vocab(toy, min_count=2)")
    assert_equal(t.student.build_vocab(TOY), t.expected("vocab", lambda ref: ref.build_vocab(TOY, 2)),
                 "build_vocab(toy) (min_count defaults to 2)")
    repeats = [["o", "o", "romeo"], ["romeo", "o"], ["alas"]]
    assert_equal(t.student.build_vocab(repeats, 3), {"o", "</s>", "<unk>"},
                 "build_vocab([['o', 'o', 'romeo'], ['romeo', 'o'], ['alas']], min_count=3)")
    sentence = ["the", "cat", "ate", "the", "mouse"]
    got = call_pure(t.student.replace_oov, sentence, {"the", "cat", "</s>", "<unk>"}, what=f"replace_oov({sentence}, vocab)")
    assert_equal(got, ["the", "cat", "<unk>", "the", "<unk>"], f"replace_oov({sentence}, {{the, cat, </s>, <unk>}})")


@check(2, 1, "pad and count_ngrams on a toy corpus", public=True, uses=("pad", "count_ngrams"))
def public_counts(t):
    got = call_pure(t.student.pad, ["to", "be"], 3, what="pad(['to', 'be'], 3)")
    assert_equal(got, ["<s>", "<s>", "to", "be", "</s>"], "pad(['to', 'be'], 3)")
    assert_equal(t.student.pad(["to", "be"], 1), ["to", "be", "</s>"], "pad(['to', 'be'], 1)")
    for n in (1, 2, 3):
        got = call_pure(t.student.count_ngrams, TOY, n, what=f"count_ngrams(toy, {n})")
        assert_equal(got, t.expected(f"counts{n}", lambda ref: ref.count_ngrams(TOY, n)), f"count_ngrams(toy, {n})")


@check(3, 1, "NGramLM probabilities and log-probabilities on a toy corpus (MLE and add-k)", public=True,
       uses=("NGramLM",), needs=("pad", "count_ngrams"))
def public_ngram_prob(t):
    cases = [("cat", ("the",)), ("sat", ["cat"]), ("the", ()), ("dog", ("a",)), ("</s>", ("saw", "sat")),
             ("sat", ("mouse",)), ("a", ("the",))]
    for k in (0.0, 0.5):
        lm = t.student.NGramLM(2, TOY_VOCAB, k).fit(TOY)

        def reference(ref, k=k):
            model = ref.NGramLM(2, TOY_VOCAB, k).fit(TOY)
            return [model.prob(w, c) for w, c in cases]

        expected = t.expected(f"k={k}", reference)
        what = f"NGramLM(2, toy_vocab, k={k})"
        for (word, context), g, e in zip(cases, lm.prob.map(cases), expected):
            assert_close(g, e, f"{what}.prob({word!r}, {context})")
        for (word, context), g, e in zip(cases, lm.logprob.map(cases), logs(expected)):
            if e == -math.inf and g != -math.inf:
                raise CheckFailed(f"{what}.logprob({word!r}, {context}): expected -inf (probability 0), got {g!r}")
            if e != -math.inf:
                assert_close(g, e, f"{what}.logprob({word!r}, {context})")


@check(3, 1, "InterpolatedLM on two table models", public=True, uses=("InterpolatedLM",))
def public_interpolation(t):
    models = [t.student.support("TableLM", 2, TABLE_VOCAB, TABLE), t.student.support("TableLM", 1, TABLE_VOCAB, UNIGRAM)]
    lm = t.student.InterpolatedLM(models, [0.75, 0.25])
    if lm.n.get() != 2:
        raise CheckFailed(f"InterpolatedLM([bigram, unigram], [0.75, 0.25]).n is {lm.n.get()!r}, expected 2 "
                          "(the largest order)")
    cases = [("a", ()), ("b", ("a",)), ("</s>", ("b",)), ("a", ("a", "b"))]
    expected = [0.75 * TABLE[tuple(c[-1:]) or ("<s>",)][w] + 0.25 * UNIGRAM[()][w] for w, c in cases]
    for (word, context), g, e in zip(cases, lm.prob.map(cases), expected):
        assert_close(g, e, f"InterpolatedLM([bigram, unigram], [0.75, 0.25]).prob({word!r}, {context})")
    assert_close(lm.logprob("b", ("a",)), math.log(expected[1]), "InterpolatedLM(...).logprob('b', ('a',))")


@check(4, 1, "sentence_logprob and perplexity on a table model", public=True, uses=("sentence_logprob", "perplexity"))
def public_chain_rule(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    expected = math.log(0.6) + math.log(0.7) + math.log(0.7)  # <s> a b </s>
    got = call_pure(t.student.sentence_logprob, lm, ["a", "b"], what="sentence_logprob(lm, ['a', 'b'])")
    assert_close(got, expected, "sentence_logprob(lm, ['a', 'b'])")
    sentences = [["a", "b"], ["b"]]
    ppl = math.exp(-(expected + math.log(0.3) + math.log(0.7)) / 5)
    got = call_pure(t.student.perplexity, lm, sentences, what="perplexity(lm, [['a', 'b'], ['b']])")
    assert_close(got, ppl, "perplexity(lm, [['a', 'b'], ['b']])")


@check(5, 1, "greedy generation on table models (a tie, and </s>)", public=True, uses=("generate",))
def public_greedy(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    assert_equal(t.student.generate(lm, 10, True), ["a", "b"], "generate(lm, max_len=10, greedy=True)")
    tie = {**TABLE, ("<s>",): {"a": 0.2, "b": 0.4, "</s>": 0.4}, ("b",): {"a": 0.45, "b": 0.1, "</s>": 0.45}}
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, tie)
    assert_equal(t.student.generate(lm, max_len=10, greedy=True), [],
                 "generate(lm, max_len=10, greedy=True) where P(b | <s>) == P(</s> | <s>) == 0.4: sorted order "
                 "puts '</s>' before 'b'")


@check(5, 1, "sampled generation follows the table model and is reproducible by seed", public=True, uses=("generate",))
def public_sampling(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    outputs = t.student.generate.map([(lm, 5, False, seed) for seed in range(600)])
    transition_test(outputs, 5, TABLE, "generate(lm, max_len=5, greedy=False, seed=s) for 600 seeds", false_fail=1e-4)
    call_twice(t.student.generate, lm, 5, False, 7, what="generate(lm, 5, False, seed=7)")


@check(6, 1, "build_model returns a normalized model on a small corpus", public=True, timeout=60,
       uses=("build_model",), needs=("build_vocab", "NGramLM", "InterpolatedLM", "tune_lambdas", "perplexity"))
def public_build_model(t):
    train = [s.split() for s in ["the cat sat", "the dog sat", "a cat saw the dog", "the dog saw a cat"] * 5]
    validation = [["the", "cat", "saw", "a", "dog"], ["a", "dog", "sat"]]
    lm = call_pure(t.student.build_model, train, validation, what="build_model(train, validation)")
    n, vocab = lm.n.get(), lm.vocab.get()
    words = sorted({w for s in train for w in s} | {"</s>", "<unk>"})
    if not isinstance(n, int) or isinstance(n, bool) or set(vocab) != set(words):
        raise CheckFailed(f"build_model(...): the model needs an int attribute n (got {n!r}) and the vocab "
                          "build_vocab(train, 1) (every word of train, </s> and <unk>)")
    contexts = [("the",), ("dog", "saw"), ("never", "seen"), ()]
    rows = t.student.support("NextWordProbe", lm, words).distributions(contexts)
    check_distributions(rows, contexts, len(words), "build_model's model: prob(w, context) for w in build_vocab(train, 1)")
    pairs = [(w, c) for w in ("cat", "</s>") for c in contexts]
    probs, logps = lm.prob.map(pairs), lm.logprob.map(pairs)
    for (word, context), p, lp in zip(pairs, probs, logps):
        assert_close(lp, math.log(p) if p > 0 else -math.inf,
                     f"build_model's model: logprob({word!r}, {context}) vs log(prob(...))", atol=1e-6)


@check(7, 1, "Kneser-Ney bigram on a toy corpus", public=True, extra=True, uses=("KneserNeyLM",),
       needs=("pad", "count_ngrams"))
def public_kneser_ney(t):
    cases = [("sat", ("cat",)), ("dog", ["the"]), ("the", ()), ("cat", ("mouse",)), ("</s>", ("a", "sat"))]
    for discount in (0.75, 0.5):
        lm = t.student.KneserNeyLM(TOY_VOCAB, discount).fit(TOY)

        def reference(ref, discount=discount):
            model = ref.KneserNeyLM(TOY_VOCAB, discount).fit(TOY)
            return [model.prob(w, c) for w, c in cases]

        expected = t.expected(f"d={discount}", reference)
        for (word, context), g, e in zip(cases, lm.prob.map(cases), expected):
            assert_close(g, e, f"KneserNeyLM(toy_vocab, {discount}).prob({word!r}, {context})")
