"""Public checks for `ngram`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: saved fixtures recorded from the reference by
`lmgrade build`, so these checks also run where the reference is not available.
"""
import math

from autograder.checks import check
from autograder.compare import assert_close, assert_equal
from autograder.errors import CheckFailed

LINES = ["Why, 'tis the KING's!", "O Romeo, Romeo! wherefore art thou Romeo?", "  Exit, pursued by a bear.  "]
TOY = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "saw", "the", "dog"]]
TOY_VOCAB = {"the", "cat", "sat", "dog", "a", "saw", "</s>", "<unk>"}
# A bigram model given by a table, so that Q4 and Q5 do not depend on your Q3 classes.
TABLE_VOCAB = ["a", "b", "</s>"]
TABLE = {("<s>",): {"a": 0.6, "b": 0.3, "</s>": 0.1},
         ("a",): {"a": 0.1, "b": 0.7, "</s>": 0.2},
         ("b",): {"a": 0.2, "b": 0.1, "</s>": 0.7}}


@check(1, 1, "tokenize on example lines", public=True)
def public_tokenize(t):
    for line in LINES:
        assert_equal(t.student.tokenize(line), t.expected(line, lambda ref: ref.tokenize(line)), f"tokenize({line!r})")


@check(1, 1, "build_vocab and replace_oov on a toy corpus", public=True)
def public_vocab(t):
    got = t.student.build_vocab(TOY, 2)
    assert_equal(got, t.expected("vocab", lambda ref: ref.build_vocab(TOY, 2)), "build_vocab(toy, min_count=2)")
    sentence = ["the", "cat", "ate", "the", "mouse"]
    assert_equal(t.student.replace_oov(sentence, {"the", "cat", "</s>", "<unk>"}),
                 ["the", "cat", "<unk>", "the", "<unk>"], f"replace_oov({sentence}, {{the, cat, </s>, <unk>}})")


@check(2, 1, "pad and count_ngrams on a toy corpus", public=True)
def public_counts(t):
    assert_equal(t.student.pad(["to", "be"], 3), ["<s>", "<s>", "to", "be", "</s>"], "pad(['to', 'be'], 3)")
    for n in (1, 2, 3):
        assert_equal(t.student.count_ngrams(TOY, n), t.expected(f"counts{n}", lambda ref: ref.count_ngrams(TOY, n)),
                     f"count_ngrams(toy, {n})")


@check(3, 1, "NGramLM probabilities on a toy corpus (MLE and add-k)", public=True)
def public_ngram_prob(t):
    cases = [("cat", ("the",)), ("sat", ("cat",)), ("the", ()), ("dog", ("a",)), ("</s>", ("saw", "sat"))]
    for k in (0.0, 0.5):
        lm = t.student.NGramLM(2, TOY_VOCAB, k).fit(TOY)
        got = lm.prob.map(cases)

        def reference(ref, k=k):
            model = ref.NGramLM(2, TOY_VOCAB, k).fit(TOY)
            return [model.prob(w, c) for w, c in cases]

        assert_close(got, t.expected(f"k={k}", reference), f"NGramLM(2, toy_vocab, k={k}).prob(word, context)")


@check(4, 1, "sentence_logprob and perplexity on a table model", public=True)
def public_chain_rule(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    expected = math.log(0.6) + math.log(0.7) + math.log(0.7)  # <s> a b </s>
    assert_close(t.student.sentence_logprob(lm, ["a", "b"]), expected, "sentence_logprob(lm, ['a', 'b'])")
    sentences = [["a", "b"], ["b"]]
    ppl = math.exp(-(expected + math.log(0.3) + math.log(0.7)) / 5)
    assert_close(t.student.perplexity(lm, sentences), ppl, "perplexity(lm, [['a', 'b'], ['b']])")


@check(5, 1, "greedy generation on a table model", public=True)
def public_greedy(t):
    lm = t.student.support("TableLM", 2, TABLE_VOCAB, TABLE)
    assert_equal(t.student.generate(lm, 10, True), ["a", "b"], "generate(lm, max_len=10, greedy=True)")


@check(6, 1, "build_model returns a normalized model on a small corpus", public=True, timeout=60)
def public_build_model(t):
    train = [s.split() for s in ["the cat sat", "the dog sat", "a cat saw the dog", "the dog saw a cat"] * 5]
    validation = [["the", "cat", "saw", "a", "dog"], ["a", "dog", "sat"]]
    lm = t.student.build_model(train, validation)
    n, vocab = lm.n.get(), lm.vocab.get()
    if not isinstance(n, int) or not {"</s>", "<unk>"} <= set(vocab) or "<s>" in vocab:
        raise CheckFailed(f"build_model(...): the model needs an int attribute n (got {n!r}) and a vocab with "
                          "</s> and <unk> but not <s> (use build_vocab(train, 1))")
    for context in [("the",), ("dog", "saw"), ("never", "seen")]:
        total = sum(lm.prob.map([(w, context) for w in sorted(vocab)]))
        assert_close(total, 1.0, f"sum over the vocabulary of model.prob(w, {context})", atol=1e-6)
