"""Perplexity-threshold checks with an entropy floor.

Why a floor: on synthetic text whose true entropy rate is known, no honest model can beat the
Bayes-optimal perplexity by more than sampling noise; one that does is reading the future.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from autograder.checking import chi_square
from autograder.errors import CheckFailed


def perplexity_from_logprobs(total_logprob: float, n_tokens: int) -> float:
    """exp of the average negative log-likelihood (natural log)."""
    if n_tokens <= 0:
        raise ValueError("no tokens")
    return math.exp(-total_logprob / n_tokens) if math.isfinite(total_logprob) else math.inf


def assert_perplexity(ppl: float, threshold: float, what: str, *, floor: float | None = None,
                      floor_slack: float = 0.02, rule: str = "the threshold") -> str:
    """Pass when floor*(1 - slack) <= ppl <= threshold; returns the line to show the student.

    Fixed words only (issue 30): `ppl` is computed on held-out text from weights the student's code
    chose, so any figure of it shown is an oracle on that text (about 10 bits a submission at 3
    decimals). The line says the rule (`rule`, e.g. "1.06 x the reference model's") and which side of
    it the model landed on; the figure itself goes only to the TA's leaderboard (`Context.publish`).
    """
    line = f"{what}: the grader's perplexity on held-out text, compared with {rule}"
    if floor is not None:
        line += " and the Bayes-optimal model's"
    if not math.isfinite(ppl):
        raise CheckFailed(f"{line}: infinite or undefined. An infinite perplexity means some token got probability 0 "
                          "(smooth the model); NaN means training diverged.")
    if floor is not None and ppl < floor * (1 - floor_slack):
        raise CheckFailed(f"{line}: below the entropy floor of the language (the Bayes-optimal model's). The model "
                          "must be seeing the tokens it predicts (look at how contexts are built).")
    if ppl > threshold:
        raise CheckFailed(f"{line}: above the threshold. The model predicts held-out text worse than expected; "
                          "measure its perplexity on your validation text to improve it.")
    return f"{line}: within the threshold."


BELOW_REFERENCE = 0.7  # a trained model under this share of the reference's perplexity has seen the test text


def judge_trained_perplexity(t, what: str, ppl: float, vocab: int, reference: float, margin: float, label: str,
                             board: str) -> None:
    """The verdict on a trained model's perplexity on held-out text, in fixed words (issue 30), for a
    training function graded against the reference's run with the same settings: at most (1 + `margin`) x
    `reference`, and not below BELOW_REFERENCE x it.

    Why no figure: the weights are the student's code's choice and the text is held out, so a perplexity
    shown to 3 decimals is an oracle on it (about 10 bits a submission). The student sees the rule and its
    side; the figure goes only to the TA's leaderboard (`board`), and only when the check passes."""
    if not math.isfinite(ppl) or ppl > 2 * vocab:
        raise CheckFailed(f"{what}: the perplexity on the held-out text is not finite or no better than a uniform "
                          f"guess over {vocab} tokens: training went uphill or diverged.")
    if ppl < reference * BELOW_REFERENCE:
        raise CheckFailed(f"{what}: the perplexity on the held-out text is far below what these settings reach "
                          f"(under {BELOW_REFERENCE} x the reference's after the same training); the grader does not "
                          "trust it. No points.")
    t.publish(board, ppl)
    t.note(assert_perplexity(ppl, reference * (1 + margin), label,
                             rule=f"{1 + margin:.2f} x the reference's after the same training"))


# ---- scoring a language model from whole next-token distributions ----------------------------------
#
# Why: a model's own `logprob(word, context)` is a number the student's code chose, and a held-out
# word passed to it is a held-out word revealed. So the grader sends only contexts, gets back the
# model's probability for every word of the vocabulary, checks on its own side that each row is a
# distribution, and reads the probability of the held-out word itself.
#
# Why sampled positions: a distribution over ~14k words costs ~14k calls of a Python `prob`
# (about 45 ms), so the ~42k distinct contexts of the test plays would take half an hour. Every
# sentence's first position shares one context (all "<s>") and is scored exactly; of the later
# positions, one is drawn in each of `n_sampled` sentences and stands for all of that sentence's
# later positions (a ratio estimator, paired with the reference on the very same positions, so most
# of the sampling noise cancels in the comparison). One position per sentence also means no asked
# context ever contains a scored word of its own sentence, and the all-"<s>" context is asked first,
# before any context that holds a first word.
@dataclass(frozen=True)
class ScoringPlan:
    """Which held-out positions are scored, and how many tokens each one stands for.

    Stratum A: position 0 of every sentence (one all-"<s>" context), scored exactly. Stratum B: one
    later position in each of a random order of sentences; `prefix(m)` uses the first m of them, so
    a check can ask for more where its decision is close.
    """

    first: tuple[int, ...]  # sentences whose position 0 is scored (all of them)
    later: tuple[tuple[int, int, int], ...]  # (sentence, position, len(sentence)) in sampling order
    n_tokens: int  # predicted tokens in the whole text: sum of len(s) + 1
    later_tokens: int  # positions 1..len(s) of every sentence
    size: int | None = None  # how many of `later` are in use (None: all)

    def prefix(self, m: int | None) -> ScoringPlan:
        return ScoringPlan(self.first, self.later, self.n_tokens, self.later_tokens, m)

    @property
    def used(self) -> tuple[tuple[int, int, int], ...]:
        return self.later if self.size is None else self.later[:self.size]

    @property
    def positions(self) -> tuple[tuple[int, int], ...]:
        return tuple((s, 0) for s in self.first) + tuple((s, i) for s, i, _ in self.used)

    @property
    def weights(self) -> np.ndarray:
        """Tokens each position stands for (a ratio estimator for stratum B); they add up to n_tokens."""
        lengths = np.array([n for _, _, n in self.used], dtype=np.float64)
        later = lengths * self.later_tokens / lengths.sum() if lengths.size else lengths
        return np.concatenate([np.ones(len(self.first)), later])


def plan_positions(sentences: list[list[str]], n_sampled: int | None, rng: np.random.Generator) -> ScoringPlan:
    """Every first position, plus one later position in `n_sampled` random sentences (all when None)."""
    lengths = [len(s) for s in sentences]
    longer = [i for i, n in enumerate(lengths) if n > 0]
    order = rng.permutation(len(longer))
    picked = [longer[k] for k in (order if n_sampled is None else order[:n_sampled])]
    later = tuple((i, int(rng.integers(1, lengths[i] + 1)), lengths[i]) for i in picked)
    return ScoringPlan(tuple(range(len(sentences))), later, sum(lengths) + len(lengths), sum(lengths))


def log_ratio(plan: ScoringPlan, logprobs, reference_logprobs) -> tuple[float, float]:
    """log(perplexity / the reference's perplexity) on the plan's positions, and its standard error.

    Why paired: both models are scored on the very same positions, so the noise is that of the
    per-token differences, not of the text. The error is the ratio estimator's, from stratum B.
    """
    d = np.asarray(reference_logprobs, dtype=np.float64) - np.asarray(logprobs, dtype=np.float64)  # (P,)
    if not np.isfinite(d).all():
        return math.inf, 0.0
    a = len(plan.first)
    value = float(np.dot(plan.weights, d)) / plan.n_tokens
    lengths = np.array([n for _, _, n in plan.used], dtype=np.float64)
    if lengths.size < 2:
        return value, 0.0
    later = d[a:]
    mean = float(np.dot(lengths, later) / lengths.sum())
    variance = float(np.sum(lengths ** 2 * (later - mean) ** 2) / lengths.sum() ** 2) * lengths.size / (lengths.size - 1)
    return value, plan.later_tokens / plan.n_tokens * math.sqrt(variance)


def context_at(sentence: list[str], position: int, n: int) -> tuple[str, ...]:
    """The n-1 tokens before `position`, left-padded with "<s>" (what an order-n model sees)."""
    padded = ("<s>",) * (n - 1) + tuple(sentence)
    return padded[position:position + n - 1]


def target_at(sentence: list[str], position: int) -> str:
    return sentence[position] if position < len(sentence) else "</s>"


def request_order(contexts, first: tuple, rng: np.random.Generator) -> list[tuple]:
    """Distinct contexts in the grader's order: `first` (the all-"<s>" one), then shuffled."""
    rest = sorted(set(contexts) - {first})
    order = [rest[i] for i in rng.permutation(len(rest))]
    return ([first] if first in set(contexts) else []) + order


def check_distributions(rows, contexts: list[tuple], n_words: int, what: str, *, tol: float = 1e-6,
                        name_contexts: bool = True) -> np.ndarray:
    """The (len(contexts), n_words) float64 array of distributions, or CheckFailed naming the first bad row.

    `name_contexts=False` for held-out contexts: every failure is then one fixed message, since a
    context, a shape, a minimum or a sum the student's code returned could spell out held-out text
    (issue 30: a row's sum printed to 9 digits encoded a held-out context).
    """
    from autograder.checking.compare import as_array
    try:
        arr, _ = as_array(rows, what)
        if arr.shape != (len(contexts), n_words):
            raise CheckFailed(f"{what}: expected {len(contexts)} distributions of {n_words} probabilities, "
                              f"got an array of shape {tuple(arr.shape)}")
        arr = arr.astype(np.float64)
        for row, context in zip(arr, contexts):
            where = f"after {context}"
            if not np.isfinite(row).all():
                raise CheckFailed(f"{what}: some probabilities {where} are NaN or infinite")
            if (row < 0).any():
                raise CheckFailed(f"{what}: a probability {where} is negative ({row.min():.6g})")
            total = float(row.sum())
            if not abs(total - 1.0) <= tol:
                raise CheckFailed(f"{what}: the probabilities {where}, summed over the {n_words} words of the "
                                  f"vocabulary, give {total:.9f}, not 1, so no perplexity computed from them means "
                                  "anything. Check that interpolation weights sum to 1 and the smoothing denominators.")
    except CheckFailed:
        if name_contexts:
            raise
        raise CheckFailed(held_out_distribution_failure(what, n_words, tol)) from None
    return arr


def held_out_distribution_failure(what: str, n_words: int, tol: float = 1e-6) -> str:
    """The one message for any bad distribution after a held-out context: fixed words, no figure."""
    return (f"{what}: the next-word distributions after held-out contexts could not all be used. Each must be "
            f"{n_words} finite, non-negative probabilities that sum to 1 (within {tol:g}). Nothing else is shown "
            "(what your code returns for held-out contexts could carry them out): run your model on the contexts "
            "of your validation text to find the problem.")


def plan_logprobs(plan: ScoringPlan, sentences, n: int, table: dict, index: dict) -> np.ndarray:
    """(P,) natural-log probabilities of the planned targets, read from distributions by context."""
    out = np.empty(len(plan.positions))
    with np.errstate(divide="ignore"):
        for k, (s, i) in enumerate(plan.positions):
            sentence = sentences[s]
            out[k] = np.log(table[context_at(sentence, i, n)][index[target_at(sentence, i)]])
    return out


def plan_perplexity(plan: ScoringPlan, logprobs) -> float:
    """exp(-(weighted sum of log-probabilities) / tokens); inf when a planned token has probability 0."""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    if not np.isfinite(logprobs).all():
        return math.inf
    return math.exp(-float(np.dot(plan.weights, logprobs)) / plan.n_tokens)


def transition_test(outputs, max_len: int, table: dict, what: str, *, false_fail: float) -> None:
    """Every draw of every generated sequence against the model's row for its context: one chi-square test.

    `table` maps contexts (tuples of n-1 tokens, "<s>"-padded) to {word or "</s>": probability} with
    every probability > 0. A sequence shorter than max_len ended with a draw of "</s>"; one of max_len
    tokens made no draw after its last word. Why whole sequences: a generator that loses its context,
    re-seeds at every step or never stops passes a test of first words.
    """
    n = len(next(iter(table))) + 1
    outcomes = list(next(iter(table.values())))
    words = [w for w in outcomes if w != "</s>"]
    counts = {context: dict.fromkeys(outcomes, 0) for context in table}
    for out in outputs:
        if not isinstance(out, list) or len(out) > max_len or any(w not in words for w in out):
            raise CheckFailed(f"{what}: an output is {out!r:.80}; expected a list of at most {max_len} words "
                              "of the vocabulary, without <s> or </s>")
        history = ["<s>"] * (n - 1) + out
        for i, word in enumerate(out + (["</s>"] if len(out) < max_len else [])):
            counts[tuple(history[i:i + n - 1])][word] += 1
    statistic, df, worst, worst_part = 0.0, 0, None, -1.0
    for context, observed in counts.items():
        draws = sum(observed.values())
        if draws == 0:
            continue
        part = sum((observed[w] - draws * table[context][w]) ** 2 / (draws * table[context][w]) for w in outcomes)
        statistic, df = statistic + part, df + len(outcomes) - 1
        if part > worst_part:
            worst, worst_part = context, part
    p_value = chi_square.tail(statistic, df)
    if p_value < false_fail:
        draws = sum(counts[worst].values())
        shares = ", ".join(f"{w} {counts[worst][w] / draws:.3f} (model {table[worst][w]:g})" for w in outcomes)
        raise CheckFailed(f"{what}: the words drawn do not follow the model (chi-square {statistic:.1f} on {df} "
                          f"degrees of freedom, p = {p_value:.1e}; a correct sampler fails this test with "
                          f"probability {false_fail:g}). Worst after {worst}, {draws} draws: {shares}. Draw every "
                          "word from the model's row for the current context, with one random.Random(seed) per call.")
