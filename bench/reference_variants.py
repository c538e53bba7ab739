"""An assignment's reference and hidden checks as modules, and variants of the reference made by
textual edits: what the threshold benches train and compare.

Why textual edits: a "correct variant written differently" or a planted bug is the staff
solution with a line or two changed, so each bench states exactly what it changed.
"""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, path: Path, text: str | None = None) -> types.ModuleType:
    """The module at `path`, or `text` run as if it were that file."""
    if text is None:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
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
