"""Provenance: a trained model earns points only if it descends from the start the grader gave it.

Why a file of its own: pasting weights trained elsewhere is the cheapest way to a trained model's
points, and the statistic that refuses it (how much of its correlation with the grader's secret
start each matrix keeps, `assert_descends`) is shared by the hidden checks and by the threshold
benches (bench/*_thresholds.py) that measure its spread over honest runs.
"""
from __future__ import annotations

import numpy as np

from autograder.errors import CheckFailed

__all__ = ["start_correlations", "start_profile", "start_shares", "assert_descends"]


def start_correlations(start: dict, final: dict, min_entries: int = 200, weights: dict | None = None) -> dict[str, float]:
    """name -> Pearson correlation of a matrix's entries at the start and after training.

    Why: a run from the grader's start keeps a clear trace of it in every matrix, while weights grown
    from any other start are independent of it: their correlation is noise of size 1/sqrt(entries).
    Only matrices (2-D or more) of at least `min_entries` entries count; a missing one counts as 0.
    `weights` (name -> non-negative array that broadcasts to the matrix) makes it a weighted
    correlation: entries that change nothing the model computes can then be given no weight, so a
    trace planted there counts for nothing (see backprop's `ffnn_relevance`).
    """
    out = {}
    for name, value in start.items():
        a = _float64(value)
        if a.ndim < 2 or a.size < min_entries:
            continue
        b = _float64(final[name]) if name in final else None
        if b is None or b.shape != a.shape:
            out[name] = 0.0
            continue
        w = np.broadcast_to(_float64(weights[name]), a.shape) if weights and name in weights else np.ones(a.shape)
        if not (np.isfinite(w).all() and w.sum() > 0 and np.isfinite(b).all()):
            out[name] = 0.0
            continue
        w = w / w.sum()
        a, b = a - float((w * a).sum()), b - float((w * b).sum())
        norm = float(np.sqrt((w * a * a).sum() * (w * b * b).sum()))
        out[name] = float((w * a * b).sum()) / norm if norm > 0 else 0.0
    return out


def start_profile(start: dict, final: dict, min_entries: int = 200, weights: dict | None = None) -> dict[str, float]:
    """The correlations a genuine run (the reference's threshold run) keeps with its start, matrix by matrix.

    Only matrices where that trace stands far out of the noise (over 6 / sqrt(entries)) are kept: on
    those, weights from another start cannot pass by chance. A JSON-able reference result.
    """
    sizes = {k: _float64(v).size for k, v in start.items()}
    return {k: round(c, 6) for k, c in start_correlations(start, final, min_entries, weights).items()
            if c > 6 / sizes[k] ** 0.5}


def start_shares(start: dict, final: dict, profile: dict, corrs: dict | None = None, weights: dict | None = None) -> dict:
    """Matrix name -> the share of the reference's correlation with the start (`profile`) that `final`
    keeps: what `assert_descends` bounds, and what the threshold benches print."""
    corrs = corrs or start_correlations({k: start[k] for k in profile}, final, min_entries=0, weights=weights)
    return {name: corrs[name] / profile[name] for name in profile}


def assert_descends(start: dict, final: dict, profile: dict, what: str, *, least: float, mean: float,
                    weights: dict | None = None) -> dict:
    """Fail unless the matrices of `profile` keep enough of the correlation with their start that the
    reference's own run keeps (`start_profile`): each at least `least` of it, and `mean` of it on average.

    Why both: matrices that training barely moves (embeddings keep 0.98-0.99 of their start) make a
    blend of pasted weights with the grader's start costly, and so does the average over every
    matrix, while a single matrix may move more in one honest run than in another (the attention
    of a last layer, say), which the lower bound on each leaves room for. Returns the shares kept.
    The message names the matrix and the figures, never the start.
    """
    if not profile:
        raise RuntimeError(f"{what}: no matrix to compare with the start")
    corrs = start_correlations({k: start[k] for k in profile}, final, min_entries=0, weights=weights)
    kept = start_shares(start, final, profile, corrs)
    name = min(kept, key=kept.get)
    average = sum(kept.values()) / len(kept)
    if not (kept[name] >= least and average >= mean):  # NaN fails too
        raise CheckFailed(
            f"{what}: the returned weights do not descend from the initial weights the grader gave: `{name}` keeps a "
            f"correlation of {corrs[name]:.3f} with its start, where training from it keeps about {profile[name]:.2f}; "
            f"over the {len(kept)} matrices compared, {average:.0%} of that trace is kept (training keeps about 90%, "
            f"{mean:.0%} and at least {least:.0%} in every matrix are needed). Only a model your function trained, from "
            "the start it is given, earns these points: train the model (or init_state) you receive, without "
            "re-creating or re-initializing it, and never load weights trained elsewhere.")
    return kept


def _float64(value) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor, on any device
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)
