"""Public checks for `ngram`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: saved fixtures recorded from the reference by
`lmgrade build`, so these checks also run where the reference is not available. The inputs are
picked to show the commonest bugs (a word that reaches min_count only inside one sentence, a
context never seen, a tie in greedy decoding, a function that changes its argument), and the edge
cases the hidden checks meet on random data: two apostrophes in one word and a ligature in
`tokenize`, `<s>` in a corpus, an n-gram repeated inside one sentence and an empty sentence, a
unigram model asked with a context, a token of probability 0 and `<unk>` in the chain rule, the
default `max_len`, a trigram greedy path and an unseen bigram after a seen Kneser-Ney context.
"""
import math

from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_equal
from autograder.checking.perplexity import check_distributions, transition_test
from autograder.checking.purity import call_pure, call_twice
from autograder.errors import CheckFailed

LINES = ["Why, 'tis the KING's!", "O Romeo, Romeo! wherefore art thou Romeo?", "  Exit, pursued by a bear.  ",
         "In 1599--at eight o'clock.", "I'th'name o'th'king, a ﬁne day!"]  # "ﬁ" is one character, a ligature
TOY = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "saw", "the", "dog"]]
TOY_VOCAB = {"the", "cat", "sat", "dog", "a", "saw", "</s>", "<unk>"}
# A bigram model given by a table, so that Q4 and Q5 do not depend on your Q3 classes.
TABLE_VOCAB = ["a", "b", "</s>"]
TABLE = {("<s>",): {"a": 0.6, "b": 0.3, "</s>": 0.1},
         ("a",): {"a": 0.1, "b": 0.7, "</s>": 0.2},
         ("b",): {"a": 0.2, "b": 0.1, "</s>": 0.7}}
UNIGRAM = {(): {"a": 0.5, "b": 0.25, "</s>": 0.25}}
# A bigram table with <unk> and one impossible bigram ("a" never follows "a"), for the chain rule.
UNK_VOCAB = ["a", "<unk>", "</s>"]
UNK_TABLE = {("<s>",): {"a": 0.5, "<unk>": 0.25, "</s>": 0.25},
             ("a",): {"a": 0.0, "<unk>": 0.5, "</s>": 0.5},
             ("<unk>",): {"a": 0.5, "<unk>": 0.25, "</s>": 0.25}}


def logs(probs):
    return [math.log(p) if p > 0 else -math.inf for p in probs]


@check(1, 1, "tokenize on example lines", public=True, uses=("tokenize",))
def public_tokenize(t):
    for line in LINES:
        assert_equal(t.student.tokenize(line), t.expected(line, lambda ref: ref.tokenize(line)), f"tokenize({line!r})")


@check(1, 1, "build_vocab and replace_oov on a toy corpus", public=True, uses=("build_vocab", "replace_oov"))
def public_vocab(t):
    got = call_pure(t.student.build_vocab, TOY, 2, what="build_vocab(toy, 2)")
    if not isinstance(got, (set, frozenset)):
        raise CheckFailed(f"build_vocab(toy, 2) returned a {type(got).__name__}; the docstring says it returns a set "
                          "(replace_oov tests membership in it for every token)")
    assert_equal(got, t.expected("vocab", lambda ref: ref.build_vocab(TOY, 2)), "build_vocab(toy, min_count=2)")
    assert_equal(t.student.build_vocab(TOY), t.expected("vocab", lambda ref: ref.build_vocab(TOY, 2)),
                 "build_vocab(toy) (min_count defaults to 2)")
    repeats = [["o", "o", "romeo"], ["romeo", "o"], ["alas"]]
    assert_equal(t.student.build_vocab(repeats, 3), {"o", "</s>", "<unk>"},
                 "build_vocab([['o', 'o', 'romeo'], ['romeo', 'o'], ['alas']], min_count=3)")
    padded = [["<s>", "o", "romeo"], ["<s>", "alas"]]
    assert_equal(t.student.build_vocab(padded, 1), {"o", "romeo", "alas", "</s>", "<unk>"},
                 f"build_vocab({padded}, min_count=1) (the vocabulary never contains '<s>', even when the "
                 "corpus has it)")
    sentence = ["the", "cat", "ate", "the", "mouse"]
    got = call_pure(t.student.replace_oov, sentence, {"the", "cat", "</s>", "<unk>"}, what=f"replace_oov({sentence}, vocab)")
    assert_equal(got, ["the", "cat", "<unk>", "the", "<unk>"], f"replace_oov({sentence}, {{the, cat, </s>, <unk>}})")
    sentence = ["<s>", "the", "cat", "</s>"]
    assert_equal(t.student.replace_oov(sentence, {"the", "cat", "</s>", "<unk>"}), ["<unk>", "the", "cat", "</s>"],
                 f"replace_oov({sentence}, {{the, cat, </s>, <unk>}}) ('<s>' is not in vocab, so it becomes '<unk>' "
                 "like any other word; no token is special here)")


@check(2, 1, "pad and count_ngrams on a toy corpus", public=True, uses=("pad", "count_ngrams"))
def public_counts(t):
    got = call_pure(t.student.pad, ["to", "be"], 3, what="pad(['to', 'be'], 3)")
    assert_equal(got, ["<s>", "<s>", "to", "be", "</s>"], "pad(['to', 'be'], 3)")
    assert_equal(t.student.pad(["to", "be"], 1), ["to", "be", "</s>"], "pad(['to', 'be'], 1)")
    for n in (1, 2, 3):
        got = call_pure(t.student.count_ngrams, TOY, n, what=f"count_ngrams(toy, {n})")
        assert_equal(got, t.expected(f"counts{n}", lambda ref: ref.count_ngrams(TOY, n)), f"count_ngrams(toy, {n})")
    repeats = [["o", "romeo", "romeo", "o", "romeo", "romeo"], []]
    for n in (1, 2):
        expected = t.expected(f"repeats{n}", lambda ref: ref.count_ngrams(repeats, n))
        assert_equal(t.student.count_ngrams(repeats, n), expected,
                     f"count_ngrams({repeats}, {n}) (count every occurrence, also repeats inside one sentence; an "
                     "empty sentence is padded too and still gives its n-grams)")


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
    unigram_cases = [("the", ()), ("the", ("a",)), ("</s>", ["cat", "sat"])]
    lm = t.student.NGramLM(1, TOY_VOCAB).fit(TOY)
    expected = t.expected("n=1", lambda ref: [ref.NGramLM(1, TOY_VOCAB).fit(TOY).prob(w, c) for w, c in unigram_cases])
    for (word, context), g, e in zip(unigram_cases, lm.prob.map(unigram_cases), expected):
        assert_close(g, e, f"NGramLM(1, toy_vocab).prob({word!r}, {context}) (a unigram model uses no context "
                           "at all: the last n-1 = 0 tokens)")


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


@check(4, 1, "sentence_logprob and perplexity on table models (<unk>, probability 0)", public=True, uses=("sentence_logprob", "perplexity"))
def public_chain_rule(t):
    # pad=False: this model, like any the spec allows, needs the "<s>" context from its caller
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE, False)
    expected = math.log(0.6) + math.log(0.7) + math.log(0.7)  # <s> a b </s>
    got = call_pure(t.student.sentence_logprob, lm, ["a", "b"], what="sentence_logprob(lm, ['a', 'b'])")
    assert_close(got, expected, "sentence_logprob(lm, ['a', 'b']) (the first word's context is ('<s>',))")
    sentences = [["a", "b"], ["b"]]
    ppl = math.exp(-(expected + math.log(0.3) + math.log(0.7)) / 5)
    got = call_pure(t.student.perplexity, lm, sentences, what="perplexity(lm, [['a', 'b'], ['b']])")
    assert_close(got, ppl, "perplexity(lm, [['a', 'b'], ['b']])")
    lm = t.student.support("TableLM", 2, UNK_VOCAB, UNK_TABLE, False)
    unk = math.log(0.25) + math.log(0.5) + math.log(0.5)  # <s> <unk> a </s>
    assert_close(t.student.sentence_logprob(lm, ["<unk>", "a"]), unk,
                 "sentence_logprob(lm, ['<unk>', 'a']) (<unk> is a word like any other: score it)")
    got = t.student.sentence_logprob(lm, ["a", "a"])
    if got != -math.inf:
        raise CheckFailed(f"sentence_logprob(lm, ['a', 'a']) where P(a | a) = 0: got {got!r}, expected -inf. A word of "
                          "probability 0 makes the sentence impossible: add lm.logprob(word, context) for every word, "
                          "-inf included, and never take math.log of a probability yourself")
    ppl = math.exp(-(unk + math.log(0.5) + math.log(0.5)) / 5)  # 3 tokens + 2 tokens, </s> and <unk> counted
    assert_close(t.student.perplexity(lm, [["<unk>", "a"], ["a"]]), ppl,
                 "perplexity(lm, [['<unk>', 'a'], ['a']]) (5 tokens: every word, <unk> too, and one </s> per sentence)")
    got = t.student.perplexity(lm, [["a"], ["a", "a"]])
    if not (isinstance(got, float) and got == math.inf):
        raise CheckFailed(f"perplexity(lm, [['a'], ['a', 'a']]) where P(a | a) = 0: got {got!r}, expected inf "
                          "(math.inf when the total log-probability is -inf)")


@check(5, 1, "greedy generation on table models (a tie, </s>, max_len, a trigram)", public=True, uses=("generate",))
def public_greedy(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    assert_equal(t.student.generate(lm, 10, True), ["a", "b"], "generate(lm, max_len=10, greedy=True)")
    tie = {**TABLE, ("<s>",): {"a": 0.2, "b": 0.4, "</s>": 0.4}, ("b",): {"a": 0.45, "b": 0.1, "</s>": 0.45}}
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, tie)
    assert_equal(t.student.generate(lm, max_len=10, greedy=True), [],
                 "generate(lm, max_len=10, greedy=True) where P(b | <s>) == P(</s> | <s>) == 0.4: sorted order "
                 "puts '</s>' before 'b'")
    loop = {**TABLE, ("a",): {"a": 0.5, "b": 0.3, "</s>": 0.2}}  # a a a ...: only max_len stops it
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, loop)
    assert_equal(t.student.generate(lm, greedy=True), ["a"] * 20,
                 "generate(lm, greedy=True) where 'a' always follows 'a' (the default max_len is 20)")
    # a trigram path that needs both context words; pad=False: the first context must be ('<s>', '<s>')
    trigram = {("<s>", "<s>"): {"a": 0.6, "b": 0.3, "</s>": 0.1}, ("<s>", "a"): {"a": 0.6, "b": 0.3, "</s>": 0.1},
               ("a", "a"): {"a": 0.1, "b": 0.6, "</s>": 0.3}, ("a", "b"): {"a": 0.1, "b": 0.2, "</s>": 0.7}}
    lm = t.student.support("TableLM", 3, TABLE_VOCAB, trigram, False)
    assert_equal(t.student.generate(lm, 10, True), ["a", "a", "b"],
                 "generate(trigram table model, 10, greedy=True): start from ('<s>', '<s>') and add every word "
                 "to the context (the next context is its last n-1 = 2 words)")


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
    # ("the", ("cat",)): a context seen in training, a bigram never seen (max(c - d, 0) is 0 there)
    cases = [("sat", ("cat",)), ("dog", ["the"]), ("the", ()), ("cat", ("mouse",)), ("</s>", ("a", "sat")),
             ("the", ("cat",))]
    for discount in (0.75, 0.5):
        lm = t.student.KneserNeyLM(TOY_VOCAB, discount).fit(TOY)

        def reference(ref, discount=discount):
            model = ref.KneserNeyLM(TOY_VOCAB, discount).fit(TOY)
            return [model.prob(w, c) for w, c in cases]

        expected = t.expected(f"d={discount}", reference)
        for (word, context), g, e in zip(cases, lm.prob.map(cases), expected):
            assert_close(g, e, f"KneserNeyLM(toy_vocab, {discount}).prob({word!r}, {context})")
