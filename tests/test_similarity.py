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
import os
import random
import re
import shutil
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import assignments
from autograder.grading import batch, similarity
from autograder.grading.records import BatchResult, file_digest
from autograder.grading.submissions import Entry
from autograder.sandbox import extract
from tests.helpers import edited_solution, solution_text
from tests.test_batch import FAST, tiny  # noqa: F401 - the small ngram copy, a module fixture
from tests.test_ngram_variants import CORRECT

NGRAM = assignments.get("ngram")
ROOT = Path(__file__).resolve().parent.parent
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


def definitions(text: str) -> dict[str, str]:
    """Each top-level function or class of `text`, as written."""
    lines = text.splitlines(keepends=True)
    return {node.name: "".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.parse(text).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def test_a_few_functions_copied_into_an_honest_notebook_rank_first(tmp_path):
    """Copying three of a classmate's functions (renamed) into one's own work: the larger of the two
    shares counts, so the copier ranks first although most of either file is not shared."""
    planted_batch(tmp_path)
    (tmp_path / "copier.py").unlink()
    original = (tmp_path / "orig.py").read_text()
    text = (tmp_path / "honest00.py").read_text()
    for name in ("count_ngrams", "InterpolatedLM", "generate"):
        own, theirs = definitions(text)[name], definitions(original)[name]
        assert own != theirs
        for old, new in RENAMES.items():
            theirs = re.sub(rf"(?<![.\w]){old}\b", new, theirs)
        text = text.replace(own, theirs)
    (tmp_path / "honest00.py").write_text(text)
    found = compare_folder(tmp_path)
    first = found.pairs[0]
    assert {first.a.key, first.b.key} == {"orig", "honest00"}
    assert first.score > 0.15 and all(p.score < first.score / 3 for p in found.pairs[1:]), \
        [(p.a.key, p.b.key, p.score) for p in found.pairs]


def test_honest_variants_and_the_starter_share_little_even_below_the_listing_threshold(tmp_path, monkeypatch):
    """Every pair with any shared fingerprint, not only those a TA is shown: the starter's code and
    the code most of the class has in common never pair two students up."""
    monkeypatch.setattr(similarity, "MIN_MATCH", 1)
    planted_batch(tmp_path)
    found = compare_folder(tmp_path)
    honest = [p for p in found.pairs if {p.a.key, p.b.key} != {"orig", "copier"}]
    assert all(p.score < 0.05 for p in honest), [(p.a.key, p.b.key, p.score) for p in honest]
    assert not [p for p in found.pairs if {p.a.key, p.b.key} & {"blank1", "blank2"}]
    assert found.starter and found.common_limit == min(10, len(list(tmp_path.iterdir())) // 2)


def test_without_the_starter_set_aside_blank_notebooks_would_pair(tmp_path):
    """The starter is what keeps two untouched notebooks apart (they are the same file)."""
    for name in ("blank1", "blank2"):
        shutil.copy(NGRAM.starter_path, tmp_path / f"{name}.ipynb")
    (tmp_path / "alice.py").write_text(solution_text("ngram"))
    docs = [doc_of(p.stem, p) for p in sorted(tmp_path.iterdir())]
    assert [(p.a.key, p.b.key) for p in similarity.compare(docs).pairs] == [("blank1", "blank2")]
    assert similarity.compare(docs, starter_tokens()).pairs == []


def test_a_copy_pasted_into_notebook_cells_still_matches_a_py_file(tmp_path):
    """The copier's notebook: one graded cell per function, exploration cells between them; the
    original is a .py file (one graded cell). Cell boundaries cost nothing."""
    planted_batch(tmp_path)
    copy = (tmp_path / "copier.py").read_text()
    lines = copy.splitlines(keepends=True)
    nb = nbformat.v4.new_notebook()
    start = 0
    for node in ast.parse(copy).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            cell = nbformat.v4.new_code_cell("# GRADED CELL\n" + "".join(lines[start:node.end_lineno]))
            cell.metadata["tags"] = ["graded"]
            nb.cells += [cell, nbformat.v4.new_code_cell("print(tally)  # exploration, never graded")]
            start = node.end_lineno
    as_py = compare_folder(tmp_path).pairs[0]
    (tmp_path / "copier.py").unlink()
    nbformat.write(nb, str(tmp_path / "copier.ipynb"))
    found = compare_folder(tmp_path)
    first = found.pairs[0]
    assert {first.a.key, first.b.key} == {"orig", "copier"} and len(first.b.cells if first.b.key == "copier"
                                                                        else first.a.cells) > 10
    assert abs(first.score - as_py.score) < 0.03, (first.score, as_py.score)
    assert all(p.score < 0.05 for p in found.pairs[1:])
    where = similarity.csv_text(found).splitlines()[1]
    assert re.search(r"cell (\d+) lines \d+-\d+ = cell 1 lines|cell 1 lines \d+-\d+ = cell (\d+) lines", where)


@pytest.mark.parametrize("left, right, same", [
    ("def f(xs):\n    total = 0\n    for x in xs:\n        total += x * 2\n    return total\n",
     "def g(items):  # sums twice each\n    '''Doc.'''\n    acc = 0\n\n    for it in items:\n"
     "        acc += it * 3   # why not\n    return acc\n", True),
    ("import numpy as np\ny = np.exp(x)\n", "import numpy as npy\ny = npy.exp(x)\n", True),
    ("y = f(a, b,)\n", "y = f(\n    a,\n    b\n)\n", True),
    ("class A:\n    def m(self):\n        self.count = 1\n        return self.count\n",
     "class B:\n    def n(me):\n        me.tally = 1\n        return me.tally\n", True),
    ("y = min(xs)\n", "y = max(xs)\n", False),  # a builtin is not a name the student chose
    ("y = x.items()\n", "y = x.values()\n", False),  # nor is a library method
    ("y = f'{x}'\n", "y = 'abc'\n", True),
])
def test_what_a_copier_changes_for_free_is_set_aside(left, right, same):
    a, _ = similarity.normalised_tokens(left)
    b, _ = similarity.normalised_tokens(right)
    assert (a == b) is same, (a, b)


def test_hashes_and_pairs_do_not_depend_on_the_process(tmp_path):
    """report.html must be the same bytes from one run and from a merge: nothing may follow
    Python's per-process string hashing."""
    planted_batch(tmp_path)
    script = ("import sys, pathlib; sys.path.insert(0, '.'); from tests import test_similarity as t; "
              "from autograder.grading import similarity as s; "
              f"f = t.compare_folder(pathlib.Path({str(tmp_path)!r})); "
              "print(s.csv_text(f)); print(s.html_section(f))")
    outs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}, cwd=ROOT).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and "copier" in outs.pop()


def test_two_hundred_submissions_compare_in_seconds(tmp_path):
    """Measured (CPU time of this process, so a loaded machine does not matter): 201 ngram solutions
    of about 1,800 tokens each, read, tokenised and compared; the planted pair is still first."""
    rng = random.Random(0)
    original, used = combined_edits()
    names = sorted(set(CORRECT) - set(used))
    for i in range(200):  # honest students, each with a few variants the planted pair does not have
        text = solution_text("ngram")
        for name in rng.sample(names, 4):
            if all(text.count(old) == 1 for old, _ in CORRECT[name][1]):
                for old, new in CORRECT[name][1]:
                    text = text.replace(old, new)
        for old in rng.sample(sorted(RENAMES), 5):
            text = re.sub(rf"(?<![.\w]){old}\b", f"{old}{i}", text)
        (tmp_path / f"s{i:03d}.py").write_text(text)
    (tmp_path / "s017.py").write_text(original)
    (tmp_path / "s200.py").write_text(disguised(original))
    start = time.process_time()
    found = compare_folder(tmp_path)
    spent = time.process_time() - start
    print(f"201 submissions read, tokenised and compared in {spent:.2f} s of CPU")
    assert spent < 30
    assert {found.pairs[0].a.key, found.pairs[0].b.key} == {"s017", "s200"}


# ---- through a real batch ---------------------------------------------------------------------
class Tags(HTMLParser):
    def __init__(self, text: str):
        super().__init__()
        self.tags = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


HOSTILE = "</pre></td><script>alert(1)</script>"


def test_a_batch_writes_similarity_csv_and_a_staff_only_section(tmp_path, tiny):
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    original, _ = combined_edits()
    # a string in the longest matching region (InterpolatedLM.prob, the variant this student wrote)
    original = original.replace("        total = 0.0\n        for weight, model in zip(",
                                f"        marker = {HOSTILE!r}\n        total = 0.0\n        for weight, model in zip(")
    assert HOSTILE in original
    (subs / "orig.py").write_text(original)
    (subs / "<b>cop.py").write_text(disguised(original))
    for name, text in variants().items():  # 12: enough that the staff code they share is common
        (subs / f"{name}.py").write_text(text)
    shutil.copy(NGRAM.starter_path, subs / "blank.ipynb")
    result = batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False, questions=["1"])
    assert result.errors == [] and result.write_errors == []

    with open(out / "similarity.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {rows[0]["student_a"], rows[0]["student_b"]} == {"orig", "<b>cop"} and float(rows[0]["similarity"]) > 0.5
    assert rows[0]["rank"] == "1" and "cell 1 lines" in rows[0]["matching_regions"]
    assert not [r for r in rows if "blank" in (r["student_a"], r["student_b"])]
    assert all(float(r["similarity"]) < 0.05 for r in rows[1:]), rows[1:]
    assert HOSTILE not in (out / "similarity.csv").read_text()  # where, never what

    report = (out / "report.html").read_text()
    assert "Similarity (staff only)" in report and "Never show this section to students" in report
    assert "&lt;/pre&gt;&lt;/td&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in report  # the excerpt, escaped
    assert "script" not in Tags(report).tags and "&lt;b&gt;cop" in report
    section = report[report.index("id='similarity'"):report.index("id='students'")]
    assert 'href="feedback/_b_cop' in section and "orig" in section and "blank" not in section
    for feedback in (out / "feedback").iterdir():  # never shown to students
        text = feedback.read_text()
        assert "imilar" not in text and "marker" not in text and "cop" not in text.replace("<b>cop", ""), feedback

    (subs / "<b>cop.py").write_text(disguised(original) + "\n# changed after grading\n")
    later = similarity.in_batch(result, tiny)
    assert [p for p in later.pairs if "<b>cop" in p.a.students + p.b.students] == []
    assert any("<b>cop: " in why and "changed since it was graded" in why for why in later.left_out)


def test_whatever_goes_wrong_the_batch_gets_a_section_that_says_so():
    found = similarity.in_batch(None, NGRAM)  # not a batch at all
    assert found.error.startswith("AttributeError") and found.pairs == []
    assert "The comparison could not run: AttributeError" in similarity.html_section(found)
    assert similarity.csv_text(found).count("\n") == 1  # the header only


def test_a_huge_submission_is_compared_on_its_first_tokens_and_says_so(tmp_path):
    huge, small = tmp_path / "huge.py", tmp_path / "small.py"
    huge.write_text("def f(x):\n" + "    x = x * 2 + 1\n" * 10_000 + "    return x\n")
    small.write_text(solution_text("ngram"))
    entries = [Entry(p.stem, [p.stem], p, str(p)) for p in (huge, small)]
    result = BatchResult(entries=entries, records={e.key: {"sha256": file_digest(e.path)} for e in entries})
    start = time.process_time()
    found = similarity.in_batch(result, NGRAM)
    assert time.process_time() - start < 10 and found.error == "" and found.compared == 2
    assert found.left_out == [f"huge: only the first {similarity.MAX_TOKENS} tokens of the graded cells were compared"]
