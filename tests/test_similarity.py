"""Similarity in a batch (autograder/grading/similarity.py): the pair a TA should look at first,
and no pair made of the starter code everyone shares.

The batches are made of the staff solution's correct variants from tests/test_ngram_variants.py
(correct code written differently, each by one edit) as the honest students; a planted original
combines one variant per function (so it has code of its own), and its copy renames the local
variables, reverses the order of the functions, drops the docstrings, changes every comment and
reformats the file (two-space indents, blank lines, a trailing comma). The starter notebook,
untouched or with one function done as the staff did, is a student too.
"""
import ast
import csv
import re
import shutil
import time
from html.parser import HTMLParser

import pytest

from autograder.authoring import assignments
from autograder.grading import batch, similarity
from autograder.sandbox import extract
from tests.helpers import edited_solution, solution_text
from tests.test_batch import FAST, tiny  # noqa: F401 - the small ngram copy, a module fixture
from tests.test_ngram_variants import CORRECT

NGRAM = assignments.get("ngram")
RENAMES = {"counts": "tally", "sentence": "sent", "padded": "seq", "token": "tk", "total": "acc",
           "words": "cands", "probs": "weights", "history": "hist", "context_count": "denom", "count": "num",
           "best": "champion", "terms": "parts", "top": "peak", "rng": "gen", "result": "out", "ngram": "gram"}

ATTRIBUTES = {"context_counts": "ctx_totals", "num_followers": "n_after", "lambdas": "mix", "discount": "d"}


def combined_edits() -> tuple[str, list[str]]:
    """The staff solution with one correct variant per function applied (the first that still
    applies, in name order): a student who wrote most functions their own way."""
    text, used, functions = solution_text("ngram"), [], set()
    for name in sorted(CORRECT):
        function, replacements = CORRECT[name]
        if function in functions or any(text.count(old) != 1 for old, _ in replacements):
            continue
        for old, new in replacements:
            text = text.replace(old, new)
        used.append(name)
        functions.add(function)
    return text, used


def disguised(text: str) -> str:
    """A copy of `text` as a student hides one: local names renamed, functions in reverse order,
    docstrings gone, other comments, two-space indents, blank lines and a trailing comma."""
    tree = ast.parse(text)
    lines = text.splitlines()
    chunks = []
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module docstring
        start = (node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno) - 1
        body = "\n".join(lines[start:node.end_lineno])
        for doc in [n for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(n)]:
            first = doc.body[0]
            span = "\n".join(lines[first.lineno - 1:first.end_lineno])
            body = body.replace(span + "\n", "", 1)
        chunks.append(body)
    out = "\n\n\n".join(reversed(chunks))
    out = re.sub(r" *#.*", "", out)  # comments gone (none is inside a string in the staff solution)
    out = out.replace("    return total\n", "    return (\n        total\n    )\n", 1)
    for old, new in RENAMES.items():
        out = re.sub(rf"(?<![.\w]){old}\b", new, out)
    for old, new in ATTRIBUTES.items():
        out = out.replace(f"self.{old}", f"self.{new}")
    out = re.sub(r"^((?:    )+)", lambda m: "  " * (len(m.group(1)) // 4), out, flags=re.M)
    out = out.replace("):\n", "):  # done by me\n", 3)
    return "# my own work\n" + out + "\n"


def variants() -> dict[str, str]:
    """Honest students: one correct variant each, those the planted original did not use."""
    _, used = combined_edits()
    return {f"honest{i:02d}": edited_solution("ngram", CORRECT[name][1])
            for i, name in enumerate(sorted(set(CORRECT) - set(used)))}


def doc_of(name: str, path) -> similarity.Doc:
    return similarity.read_doc(name, [name], str(path), extract.read_submission(path).cells)


def starter_tokens() -> list[str]:
    return similarity.read_doc("", [], "", extract.read_submission(NGRAM.starter_path).cells).texts


def planted_batch(folder) -> None:
    original, _ = combined_edits()
    (folder / "orig.py").write_text(original)
    (folder / "copier.py").write_text(disguised(original))
    for name, text in variants().items():
        (folder / f"{name}.py").write_text(text)
    shutil.copy(NGRAM.starter_path, folder / "blank1.ipynb")
    shutil.copy(NGRAM.starter_path, folder / "blank2.ipynb")


def compare_folder(folder) -> similarity.Findings:
    docs = [doc_of(p.stem, p) for p in sorted(folder.iterdir())]
    return similarity.compare(docs, starter_tokens())


def test_the_disguised_copy_still_parses_and_differs_in_text(tmp_path):
    original, used = combined_edits()
    copy = disguised(original)
    ast.parse(copy)
    assert len(used) >= 8, used  # the original is mostly the student's own code
    same = set(original.splitlines()) & set(copy.splitlines())  # signatures stay: the checks call them by name
    assert {line for line in same if line.strip() and not line.startswith(("def ", "class ", "import ", "from "))} \
        == set()


def test_a_planted_copy_ranks_first_and_honest_variants_stay_low(tmp_path):
    planted_batch(tmp_path)
    found = compare_folder(tmp_path)
    assert found.pairs, "no pair found"
    first = found.pairs[0]
    assert {first.a.key, first.b.key} == {"orig", "copier"}
    # half of each one's own code is the staff code every honest student has too (set aside as common)
    assert first.score > 0.5 and min(first.matched) > 600, (first.score, first.matched)
    others = [p for p in found.pairs[1:]]
    assert all(p.score < 0.05 for p in others), [(p.a.key, p.b.key, p.score) for p in others]
    assert not [p for p in found.pairs if "blank1" in (p.a.key, p.b.key) or "blank2" in (p.a.key, p.b.key)]
