"""Gradescope's results.json format: why a document is not one Gradescope accepts.

Its own file because it judges documents made elsewhere (results.py writes them): `run` checks each
one before writing it, `run_autograder` calls `python -m autograder.grading.gradescope validate` on
the file left behind, and selftest and the tests use it too. It needs only the standard library.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

RESULT_LIMIT = 100_000  # Gradescope cuts text fields here; results.py clips well below it
_VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
_TEST_KEYS = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
              "tags", "visibility", "extra_data"}


def validate(doc) -> list[str]:
    """Why `doc` is not a results.json Gradescope accepts (empty list: it is)."""
    problems = []

    def number(value) -> bool:
        return type(value) in (int, float) and math.isfinite(value)

    if type(doc) is not dict:
        return ["not a JSON object"]
    if not isinstance(doc.get("tests"), list):
        problems.append("tests is not a list")
    if "score" in doc and not number(doc["score"]):
        problems.append("score is not a finite number")
    for key in ("output",):
        if key in doc and (type(doc[key]) is not str or len(doc[key]) >= RESULT_LIMIT):
            problems.append(f"{key} is not a string under {RESULT_LIMIT} characters")
    for key in ("visibility", "stdout_visibility"):
        if key in doc and doc[key] not in _VISIBILITY:
            problems.append(f"{key} is {doc[key]!r}")
    tests = doc.get("tests") if isinstance(doc.get("tests"), list) else []
    if "score" not in doc and not all(type(t) is dict and "score" in t for t in tests):
        problems.append("no score, and a test without one")
    for i, test in enumerate(tests):
        if type(test) is not dict:
            problems.append(f"tests[{i}] is not an object")
            continue
        if set(test) - _TEST_KEYS:
            problems.append(f"tests[{i}] has unknown keys {sorted(set(test) - _TEST_KEYS)}")
        for key in ("score", "max_score"):
            if key in test and not number(test[key]):
                problems.append(f"tests[{i}].{key} is not a finite number")
        for key in ("name", "number", "output"):
            if key in test and (type(test[key]) is not str or len(test[key]) >= RESULT_LIMIT):
                problems.append(f"tests[{i}].{key} is not a string under {RESULT_LIMIT} characters")
        if test.get("status", "passed") not in ("passed", "failed"):
            problems.append(f"tests[{i}].status is {test['status']!r}")
        if test.get("visibility", "visible") not in _VISIBILITY:
            problems.append(f"tests[{i}].visibility is {test['visibility']!r}")
    board = doc.get("leaderboard", [])
    if not isinstance(board, list):
        problems.append("leaderboard is not a list")
    for i, entry in enumerate(board if isinstance(board, list) else []):
        if type(entry) is not dict or set(entry) - {"name", "value", "order"}:
            problems.append(f"leaderboard[{i}] is not an object of name, value and order")
            continue
        if type(entry.get("name")) is not str or not 1 <= len(entry["name"]) <= 64:
            problems.append(f"leaderboard[{i}].name is not a string of 1 to 64 characters")
        if not (number(entry.get("value")) or type(entry.get("value")) is str):
            problems.append(f"leaderboard[{i}].value is not a finite number or a string")
        if entry.get("order", "desc") not in ("asc", "desc"):
            problems.append(f"leaderboard[{i}].order is {entry['order']!r}")
    return problems


def validate_file(path: Path) -> list[str]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        return [f"unreadable: {exc}"]

    def no_constants(name):
        raise ValueError(f"{name} is not JSON")

    try:
        doc = json.loads(text, parse_constant=no_constants)
    except ValueError as exc:
        return [f"not JSON: {exc}"]
    return validate(doc)
