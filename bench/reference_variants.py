"""An assignment's reference and hidden checks as modules, and variants of the reference made by
textual edits: what the threshold benches train and compare.

Why textual edits: a "correct variant written differently" or a planted bug is the staff
solution with a line or two changed, so each bench states exactly what it changed.
"""
from __future__ import annotations

import types
from pathlib import Path

from autograder.authoring import assignments

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, path: Path, text: str | None = None) -> types.ModuleType:
    """The module at `path`, or `text` run as if it were that file."""
    if text is None:
        return assignments.load_module(Path(path), name)
    module = types.ModuleType(name)
    exec(compile(text, str(path), "exec"), module.__dict__)  # noqa: S102 - our own reference, edited
    return module


def modules(assignment_id: str):
    """(reference, hidden checks, variant) where `variant(*(old, new))` edits the reference."""
    path = ROOT / "solutions" / f"{assignment_id}.py"
    reference_text = path.read_text()

    def variant(*edits) -> types.ModuleType:
        text = reference_text
        for old, new in edits:
            assert text.count(old) == 1, old
            text = text.replace(old, new)
        return load("variant", path, text)

    return load("ref", path), load("hidden", ROOT / "assignments" / assignment_id / "hidden_checks.py"), variant


def blend_toward(pasted: dict, start: dict, targets: dict) -> dict:
    """`pasted` with just enough of `start` added to each matrix named in `targets` that its correlation with
    `start` is the target.

    Why: the cheapest way round the provenance statistic (autograder.checking.provenance.assert_descends) for weights
    trained elsewhere; the benches score what it does to the model.
    """
    import torch

    out = {k: v.clone() for k, v in pasted.items()}
    for name, target in targets.items():
        p64 = pasted[name].double()
        centred = start[name].double() - start[name].double().mean()

        def corr(alpha):
            x, y = (p64 + alpha * centred).flatten(), centred.flatten()
            x = x - x.mean()
            return float(x @ y / (x.norm() * y.norm()))

        low, high = 0.0, 1.0
        while corr(high) < target:
            high *= 2
        for _ in range(40):
            mid = (low + high) / 2
            low, high = (mid, high) if corr(mid) < target else (low, mid)
        out[name] = (p64 + high * centred).to(pasted[name].dtype)
    if "head.weight" in out and "tok_emb.weight" in out and torch.equal(pasted["head.weight"], pasted["tok_emb.weight"]):
        out["head.weight"] = out["tok_emb.weight"]  # a tied head stays the embedding
    return out
