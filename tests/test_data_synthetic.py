"""The synthetic language's probabilities are exact, so its perplexity is a true floor."""
import collections
import itertools
import math

import numpy as np
import pytest

from autograder.data.synthetic import HiddenMarkovLanguage


@pytest.fixture(scope="module")
def tiny() -> HiddenMarkovLanguage:
    return HiddenMarkovLanguage.random(seed=3, n_states=3, vocab_size=4, mean_length=3.0)


@pytest.fixture(scope="module")
def lang() -> HiddenMarkovLanguage:
    return HiddenMarkovLanguage.random(seed=0)


@pytest.fixture(scope="module")
def big_sample(lang) -> list[list[str]]:
    return lang.sample(20000, seed=1)


def brute_force_prob(m: HiddenMarkovLanguage, tokens: list[str]) -> float:
    """Sum over every state path, straight from the definition."""
    ids = [m.words.index(t) for t in tokens]
    total = 0.0
    for path in itertools.product(range(m.n_states), repeat=len(ids)):
        p = m.start[path[0]] * m.emit[path[0], ids[0]]
        for prev, s, w in zip(path, path[1:], ids[1:]):
            p *= m.trans[prev, s] * m.emit[s, w]
        total += p * m.stop[path[-1]]
    return total


def test_random_language_is_well_formed(lang):
    S, V = lang.emit.shape
    assert (S, V) == (8, 60)
    for a in (lang.start, lang.trans, lang.stop, lang.emit):
        assert a.dtype == np.float64 and (a >= 0).all()
    np.testing.assert_allclose(lang.trans.sum(axis=1) + lang.stop, 1.0, atol=1e-12)
    np.testing.assert_allclose(lang.emit.sum(axis=1), 1.0, atol=1e-12)
    assert len(set(lang.words)) == V
    assert all(w.islower() and w.isalpha() for w in lang.words)
    assert not {"<s>", "</s>", "<unk>"} & set(lang.words)


def test_forward_equals_brute_force(tiny):
    for n in range(1, 5):
        for tokens in itertools.product(tiny.words, repeat=n):
            expected = brute_force_prob(tiny, list(tokens))
            got = math.exp(tiny.sentence_logprob(list(tokens)))
            assert got == pytest.approx(expected, rel=1e-12, abs=0.0)


def test_probabilities_up_to_length_L_sum_to_one_minus_tail(tiny):
    L = 5
    total = sum(
        math.exp(tiny.sentence_logprob(list(t)))
        for n in range(1, L + 1)
        for t in itertools.product(tiny.words, repeat=n)
    )
    # P(length > L) = P(the sentence is still going after L words) = start T^L 1.
    tail = tiny.start @ np.linalg.matrix_power(tiny.trans, L) @ np.ones(tiny.n_states)
    assert tail > 0.01  # the check below would be weak if the tail were negligible
    assert total == pytest.approx(1.0 - tail, rel=1e-12)


def test_impossible_sentences_have_zero_probability(lang):
    assert lang.sentence_logprob([]) == -math.inf
    assert lang.sentence_logprob([lang.words[0], "<unk>"]) == -math.inf


def test_long_sentence_does_not_underflow(lang):
    logp = lang.sentence_logprob([lang.words[0]] * 2000)
    assert math.isfinite(logp) and logp < -700  # exp(logp) would underflow float64


def test_first_word_frequency_matches_marginal(lang, big_sample):
    counts = collections.Counter(s[0] for s in big_sample)
    freq = np.array([counts[w] for w in lang.words]) / len(big_sample)
    marginal = lang.start @ lang.emit  # (V,)
    assert np.abs(freq - marginal).max() < 0.01


def test_sentences_are_non_empty_with_plausible_length(big_sample):
    lengths = [len(s) for s in big_sample]
    assert min(lengths) >= 1
    assert 6 < np.mean(lengths) < 24  # mean_length=12, per-state stop varies


def test_same_seed_same_language_and_sample():
    a, b = HiddenMarkovLanguage.random(7), HiddenMarkovLanguage.random(7)
    for name in ("start", "trans", "stop", "emit"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.words == b.words
    assert a.sample(50, seed=5) == b.sample(50, seed=5)
    assert a.sample(50, seed=5) != a.sample(50, seed=6)
    assert not np.array_equal(a.emit, HiddenMarkovLanguage.random(8).emit)


def test_sample_perplexity_matches_monte_carlo_estimate(lang, big_sample):
    big = lang.perplexity(big_sample)
    estimate = lang.entropy_rate_perplexity(n_sentences=2000, seed=2)
    assert 1.0 < big < len(lang.words) + 1
    assert estimate == pytest.approx(big, rel=0.05)


def test_bigram_model_cannot_beat_the_floor(lang, big_sample):
    """An add-k bigram model fit on lots of data still scores worse than the true model."""
    k, vocab = 0.01, len(lang.words) + 1  # + </s>
    pair, context = collections.Counter(), collections.Counter()
    for s in big_sample:
        toks = ["<s>", *s, "</s>"]
        pair.update(zip(toks, toks[1:]))
        context.update(toks[:-1])
    held_out = lang.sample(2000, seed=99)
    logp, n = 0.0, 0
    for s in held_out:
        toks = ["<s>", *s, "</s>"]
        for a, b in zip(toks, toks[1:]):
            logp += math.log((pair[a, b] + k) / (context[a] + k * vocab))
            n += 1
    bigram = math.exp(-logp / n)
    floor = lang.perplexity(held_out)
    assert n == sum(len(s) + 1 for s in held_out)
    assert bigram > 1.05 * floor


def test_token_logprobs_are_the_chain_rule_of_sentence_logprob(lang, big_sample):
    for sentence in big_sample[:200]:
        parts = lang.token_logprobs(sentence)
        assert parts.shape == (len(sentence) + 1,)
        assert parts.sum() == pytest.approx(lang.sentence_logprob(sentence), rel=1e-10)
    assert lang.token_logprobs([])[0] == -math.inf
    assert lang.token_logprobs([lang.words[0], "<unk>"])[1] == -math.inf


def test_token_logprobs_are_next_word_distributions(tiny):
    """After any prefix, the probabilities of every next word and of the end add up to 1."""
    for prefix in ([], [tiny.words[0]], [tiny.words[1], tiny.words[3], tiny.words[1]]):
        nxt = [math.exp(tiny.token_logprobs(prefix + [w])[len(prefix)]) for w in tiny.words]
        end = math.exp(tiny.token_logprobs(prefix)[len(prefix)]) if prefix else 0.0
        assert sum(nxt) + end == pytest.approx(1.0, abs=1e-12)
