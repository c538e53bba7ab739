"""Perplexity-threshold checks with an entropy floor.

Why a floor: on synthetic text whose true entropy rate is known, no honest model can beat the
Bayes-optimal perplexity by more than sampling noise; one that does is reading the future.
"""
from __future__ import annotations

import math

from autograder.errors import CheckFailed


def perplexity_from_logprobs(total_logprob: float, n_tokens: int) -> float:
    """exp of the average negative log-likelihood (natural log)."""
    if n_tokens <= 0:
        raise ValueError("no tokens")
    return math.exp(-total_logprob / n_tokens) if math.isfinite(total_logprob) else math.inf


def assert_perplexity(ppl: float, threshold: float, what: str, *, floor: float | None = None,
                      floor_slack: float = 0.02) -> str:
    """Pass when floor*(1 - slack) <= ppl <= threshold; returns the line to show the student."""
    line = f"{what}: perplexity {ppl:.3f} (threshold {threshold:.3f}"
    line += f", Bayes-optimal {floor:.3f})" if floor is not None else ")"
    if not math.isfinite(ppl):
        raise CheckFailed(f"{line}. An infinite perplexity means some token got probability 0: smooth the model.")
    if floor is not None and ppl < floor * (1 - floor_slack):
        raise CheckFailed(f"{line}. This is below the entropy floor of the language: the model must be seeing "
                          "the tokens it predicts (look at how contexts are built).")
    if ppl > threshold:
        raise CheckFailed(f"{line}. The model predicts held-out text worse than expected.")
    return line
