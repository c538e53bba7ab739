"""Synthetic text with a known entropy rate, to put a floor under perplexity.

Why: on real text nobody knows the best achievable perplexity. Here the text comes from a
seeded hidden Markov model, so the exact probability of every sentence is computable (forward
algorithm) and the model's own perplexity on a sample is the Bayes-optimal score: no student
model can beat it except by luck on a small sample.

The hidden states are sticky "topics": a state tends to repeat for many words, and each state
emits from its own skewed word distribution, with words shared between states. The best guess
for the next word therefore depends on evidence about the topic from arbitrarily far back,
which no short n-gram window captures.

Sentences end by a stop event after any word (probability `stop[s]` in state s), so every
sentence has at least one word; perplexity counts that end event as one token, as n-gram
models count `</s>`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

_RESERVED = frozenset({"<s>", "</s>", "<unk>"})
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"


def _pseudo_words(rng: np.random.Generator, n: int) -> list[str]:
    """n distinct pronounceable lowercase words like 'tamo', 'vekri'."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        syllables = int(rng.integers(1, 4))  # 1..3 syllables
        word = "".join(
            _CONSONANTS[rng.integers(len(_CONSONANTS))] + _VOWELS[rng.integers(len(_VOWELS))]
            for _ in range(syllables)
        )
        if rng.random() < 0.3:
            word += _CONSONANTS[rng.integers(len(_CONSONANTS))]
        if word not in seen and word not in _RESERVED:
            seen.add(word)
            words.append(word)
    return words


def _draw(rng: np.random.Generator, cdf: np.ndarray) -> np.ndarray:
    """One categorical draw per row of `cdf` (N, K) by inverse CDF -> indices (N,)."""
    u = rng.random(cdf.shape[0])
    idx = (u[:, None] >= cdf).sum(axis=1)
    return np.minimum(idx, cdf.shape[1] - 1)  # guard against cdf[-1] rounding below u


@dataclass(eq=False)  # eq=False: numpy arrays have no single truth value for ==
class HiddenMarkovLanguage:
    """A hidden Markov model over words with an explicit end-of-sentence event.

    A sentence w_1..w_n has probability
        sum over s_1..s_n of start[s_1] emit[s_1, w_1] trans[s_1, s_2] ... emit[s_n, w_n] stop[s_n],
    and trans[s].sum() + stop[s] == 1 for every state s.
    """

    start: np.ndarray  # (S,) distribution of the first state
    trans: np.ndarray  # (S, S) P(next state, sentence continues | state)
    stop: np.ndarray  # (S,) P(sentence ends | state)
    emit: np.ndarray  # (S, V) P(word | state)
    words: list[str]  # (V,) distinct lowercase pseudo-words
    _index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.start, self.trans, self.stop, self.emit = (
            np.asarray(a, dtype=np.float64) for a in (self.start, self.trans, self.stop, self.emit)
        )
        S, V = self.emit.shape
        if self.start.shape != (S,) or self.trans.shape != (S, S) or self.stop.shape != (S,):
            raise ValueError("shapes must be start (S,), trans (S, S), stop (S,), emit (S, V)")
        if len(self.words) != V or len(set(self.words)) != V or _RESERVED & set(self.words):
            raise ValueError("words must be V distinct strings, none of <s>, </s>, <unk>")
        for name, total in (
            ("start", self.start.sum()),
            ("trans + stop", self.trans.sum(axis=1) + self.stop),
            ("emit", self.emit.sum(axis=1)),
        ):
            if not np.allclose(total, 1.0, atol=1e-9):
                raise ValueError(f"{name} must sum to 1")
        self._index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def random(
        cls, seed: int, n_states: int = 8, vocab_size: int = 60, mean_length: float = 12.0
    ) -> HiddenMarkovLanguage:
        """A random sticky-topic language, the same for the same arguments."""
        if n_states < 1 or vocab_size < 1 or mean_length < 1:
            raise ValueError("need n_states >= 1, vocab_size >= 1, mean_length >= 1")
        rng = np.random.default_rng(seed)
        S, V = n_states, vocab_size
        start = rng.dirichlet(np.ones(S))
        # Sticky topics: stay with prob 0.75..0.95, otherwise jump to another state.
        stay = rng.uniform(0.75, 0.95, size=S) if S > 1 else np.ones(1)
        move = np.zeros((S, S))
        for s in range(S):
            others = [t for t in range(S) if t != s]
            move[s, s] = stay[s]
            if others:
                move[s, others] = (1.0 - stay[s]) * rng.dirichlet(np.full(S - 1, 0.5))
        # Per-state stop probability around 1 / mean_length: lengths are ~geometric.
        stop = np.clip(rng.uniform(0.5, 1.5, size=S) / mean_length, 1e-6, 1.0)
        trans = move * (1.0 - stop)[:, None]
        # Skewed, overlapping vocabularies: a word hints at its topic but rarely proves it.
        emit = rng.dirichlet(np.full(V, 0.3), size=S)
        return cls(start=start, trans=trans, stop=stop, emit=emit, words=_pseudo_words(rng, V))

    @property
    def n_states(self) -> int:
        return self.emit.shape[0]

    def sample(self, n_sentences: int, seed: int) -> list[list[str]]:
        """n sentences (lists of words, no end marker), the same for the same seed."""
        rng = np.random.default_rng(seed)
        S = self.n_states
        cdf_emit = np.cumsum(self.emit, axis=1)  # (S, V)
        # (S, S+1): column S is the stop event
        cdf_next = np.cumsum(np.concatenate([self.trans, self.stop[:, None]], axis=1), axis=1)
        state = _draw(rng, np.tile(np.cumsum(self.start), (n_sentences, 1)))  # (N,)
        active = np.arange(n_sentences)  # sentences not yet ended
        out: list[list[str]] = [[] for _ in range(n_sentences)]
        while active.size:
            word = _draw(rng, cdf_emit[state[active]])
            for i, w in zip(active.tolist(), word.tolist()):
                out[i].append(self.words[w])
            nxt = _draw(rng, cdf_next[state[active]])
            going = nxt < S
            state[active[going]] = nxt[going]
            active = active[going]
        return out

    def sentence_logprob(self, tokens: list[str]) -> float:
        """Exact natural-log probability of the sentence, end event included.

        Forward algorithm with per-step rescaling: alpha stays a distribution over states and
        the log of each normaliser is accumulated, so long sentences do not underflow.
        """
        ids = [self._index.get(t) for t in tokens]
        if not ids or any(i is None for i in ids):
            return -math.inf
        alpha = self.start * self.emit[:, ids[0]]  # (S,) P(words so far, state), rescaled below
        logp = 0.0
        for w in ids[1:]:
            norm = alpha.sum()
            if norm <= 0.0:
                return -math.inf
            logp += math.log(norm)
            alpha = ((alpha / norm) @ self.trans) * self.emit[:, w]
        end = float(alpha @ self.stop)
        return logp + math.log(end) if end > 0.0 else -math.inf

    def token_logprobs(self, tokens: list[str]) -> np.ndarray:
        """(len(tokens) + 1,) log P(token_i | all tokens before it), the end event last.

        Why: the Bayes-optimal score of single positions, so that a model scored on sampled
        positions is compared with the floor on the same ones. They add up to sentence_logprob.
        """
        ids = [self._index.get(t) for t in tokens]
        out = np.full(len(ids) + 1, -np.inf)
        belief = self.start  # (S,) P(state of the next word | words so far), given the sentence goes on
        go_on = 1.0  # P(the sentence goes on | words so far)
        for i, w in enumerate(ids):
            if w is None:
                return out
            joint = belief * self.emit[:, w]  # (S,)
            p = go_on * float(joint.sum())
            if p <= 0.0:
                return out
            out[i] = math.log(p)
            post = joint / joint.sum()  # (S,) state of word i
            nxt = post @ self.trans  # (S,) P(next state, continue)
            go_on = float(nxt.sum())
            belief = nxt / go_on if go_on > 0 else nxt
        end = float(post @ self.stop) if ids else 0.0  # an empty sentence is impossible
        if end > 0.0:
            out[len(ids)] = math.log(end)
        return out

    def perplexity(self, sentences: list[list[str]]) -> float:
        """exp(-sum log p / sum(len + 1)): the Bayes-optimal perplexity on these sentences."""
        total = sum(self.sentence_logprob(s) for s in sentences)
        n_tokens = sum(len(s) + 1 for s in sentences)  # +1: the end event, like </s>
        return math.exp(-total / n_tokens)

    def entropy_rate_perplexity(self, n_sentences: int = 2000, seed: int = 0) -> float:
        """Monte Carlo estimate of the language's perplexity floor from a fresh sample."""
        return self.perplexity(self.sample(n_sentences, seed))
