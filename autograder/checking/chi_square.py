"""Pearson's chi-square test, for the checks that judge a sampler by the frequencies of its draws.

Why one module: each sampling check states its false-fail rate exactly (the p-value a correct sampler
falls under with that probability), so they share one tail and one way of pooling rare outcomes.
"""
import math

import numpy as np


def tail(x: float, df: int) -> float:
    """P(X >= x) for X ~ chi-square with `df` degrees of freedom (regularized upper gamma Q(df/2, x/2)).

    Why written here: numpy has no chi-square tail, and torch's gammaincc would tie the n-gram checks to torch.
    """
    a, z = df / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    log_front = -z + a * math.log(z) - math.lgamma(a)
    if z < a + 1:  # series for the lower part P(a, z)
        term = total = 1.0 / a
        k = a
        while abs(term) > abs(total) * 1e-16:
            k += 1
            term *= z / k
            total += term
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300  # continued fraction for Q(a, z), modified Lentz
    b = z + 1.0 - a
    c, d = 1.0 / tiny, 1.0 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return math.exp(log_front) * h


def pearson(counts, probs) -> tuple[float, float, int]:
    """(p-value, statistic, degrees of freedom) of `counts` against `probs` (which sum to 1).

    Outcomes expected fewer than 5 times are pooled into one bin, where the chi-square law holds; a draw of
    an outcome of probability 0 gives p = 0.
    """
    counts, probs = np.asarray(counts, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    expected = probs * counts.sum()
    big = expected >= 5
    observed, wanted = list(counts[big]), list(expected[big])
    if (~big).any() and (expected[~big].sum() > 0 or counts[~big].sum() > 0):
        observed.append(counts[~big].sum())
        wanted.append(expected[~big].sum())
    observed, wanted = np.array(observed), np.array(wanted)
    if ((wanted == 0) & (observed > 0)).any():
        return 0.0, math.inf, len(observed) - 1
    statistic = float(((observed - wanted) ** 2 / np.where(wanted > 0, wanted, 1.0)).sum())
    df = max(len(observed) - 1, 1)
    return tail(statistic, df), statistic, df
