"""Broken submissions against the real `ngram` assignment: grading always finishes, the broken part
fails with a message a student can act on, and everything else still earns its points.

Submissions are the staff solution with one small change, written as a notebook with one graded
cell per function (or as a .py file). Only fast questions are graded (Q1, Q3, Q4: well under a
second each for the staff solution); Q2's 1M-token speed check and Q6's training are left out.
"""
import ast
import json
import re

import nbformat
import pytest

from autograder.authoring import assignments
from autograder.grading import runner
from autograder.sandbox.limits import Limits

LIMITS = Limits(call_timeout=2, load_timeout=5)
NGRAM = assignments.get("ngram")


def solution_chunks() -> dict[str, str]:
    """The staff solution split into one source chunk per top-level function or class.

    Imports and comments between definitions go with the definition that follows them.
    """
    text = NGRAM.reference_path.read_text()
    lines = text.splitlines(keepends=True)
    chunks, start = {}, 0
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            chunks[node.name] = "".join(lines[start:node.end_lineno])
            start = node.end_lineno
    return chunks


def edit(chunks: dict[str, str], name: str, old: str, new: str) -> dict[str, str]:
    assert old in chunks[name], f"{old!r} not in {name}: the solution changed, update this test"
    return {**chunks, name: chunks[name].replace(old, new, 1)}


def write_notebook(tmp_path, chunks: dict[str, str]):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# N-gram homework"))
    for source in chunks.values():
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["tags"] = ["graded"]
        nb.cells.append(cell)
        nb.cells.append(nbformat.v4.new_code_cell("# exploration\nprint('hello')"))  # never graded
    path = tmp_path / "submission.ipynb"
    nbformat.write(nb, str(path))
    return path


def write_py(tmp_path, chunks: dict[str, str]):
    path = tmp_path / "submission.py"
    path.write_text("".join(chunks.values()))
    return path


def grade(path, questions=("1", "3")):
    report = runner.grade(path, NGRAM, questions=set(questions), limits=LIMITS)
    assert report.results, "no checks ran"
    return report, {r.name: r for r in report.results}


def def_line(source: str, name: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if re.match(rf"(def|class) {name}\b", line))


TOKENIZE = ("public_tokenize", "tokenize_hidden")
VOCAB = ("public_vocab", "vocab_hidden")
Q3 = ("public_ngram_prob", "mle_hidden", "addk_hidden", "normalization", "unseen_nonzero", "interpolation_hidden",
      "tune_lambdas_hidden")


def assert_results(results: dict, failing, passing, *words: str) -> None:
    """`failing` checks fail and mention every word (case-insensitive); `passing` checks pass."""
    for name in failing:
        result = results[name]
        assert not result.passed and result.score == 0, (name, result.output)
        for word in words:
            assert word.lower() in result.output.lower(), (name, word, result.output)
        assert "not your fault" not in result.output  # a student problem, not a grader bug
    for name in passing:
        assert results[name].passed and results[name].score == results[name].max_score, (name, results[name].output)


@pytest.fixture(scope="module")
def chunks() -> dict[str, str]:
    found = solution_chunks()
    for name in ("tokenize", "build_vocab", "replace_oov", "count_ngrams", "NGramLM", "perplexity"):
        assert name in found
    return found


def test_staff_solution_as_a_notebook_passes(tmp_path, chunks):
    report, results = grade(write_notebook(tmp_path, chunks), questions=("1", "3", "4"))
    assert all(r.passed for r in report.results), [(r.name, r.output) for r in report.results if not r.passed]
    assert report.notes == []


def test_invalid_notebook_json(tmp_path, chunks):
    path = write_notebook(tmp_path, chunks)
    text = path.read_text()
    path.write_text(text[:len(text) // 2] + "<<<<<<< HEAD\n" + text[len(text) // 2:])  # a merge conflict
    report, results = grade(path, questions=("1",))
    assert len(results) == 4
    assert_results(results, [*TOKENIZE, *VOCAB], [], "not valid JSON", "line")
    assert report.notes[0].startswith("Nothing could be graded") and report.score == 0


def test_syntax_error_in_one_graded_cell(tmp_path, chunks):
    broken = edit(chunks, "tokenize", "return re.findall(", "return re.findall((")
    report, results = grade(write_notebook(tmp_path, broken))
    assert_results(results, TOKENIZE, [*VOCAB, *Q3], "syntax error", "graded cell")
    assert any("syntax error" in note for note in report.notes)


def test_syntax_error_cell_number_and_line_are_the_notebooks(tmp_path, chunks):
    broken = edit(chunks, "replace_oov", "return [", "return [[")
    path = write_notebook(tmp_path, broken)
    number = 1 + list(broken).index("replace_oov")  # as the student counts `# GRADED CELL` headers, no other cell
    report, results = grade(path, questions=("1",))
    line = def_line(broken["replace_oov"], "replace_oov") + 1  # unclosed bracket reported at the return line
    assert_results(results, ["public_vocab"], TOKENIZE, f"graded cell {number}", "syntax error")
    assert any(f"Graded cell {number} (defining `replace_oov`" in note and "has a syntax error" in note
               for note in report.notes), report.notes
    assert str(line) in results["public_vocab"].output or "never closed" in results["public_vocab"].output


@pytest.mark.parametrize("fmt", ["ipynb", "py"])
def test_missing_function(tmp_path, chunks, fmt):
    missing = {name: source for name, source in chunks.items() if name != "replace_oov"}
    path = (write_notebook if fmt == "ipynb" else write_py)(tmp_path, missing)
    report, results = grade(path)
    assert_results(results, VOCAB, [*TOKENIZE, *Q3], "replace_oov", "not define")


def test_renamed_function_points_at_the_spelling(tmp_path, chunks):
    renamed = edit(chunks, "tokenize", "def tokenize(", "def tokenise(")
    report, results = grade(write_py(tmp_path, renamed), questions=("1",))
    assert_results(results, TOKENIZE, VOCAB, "does not define `tokenize`", "spelling")


def test_function_only_in_an_ungraded_cell(tmp_path, chunks):
    path = write_notebook(tmp_path, chunks)
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if "def tokenize(" in c.source)
    cell.metadata["tags"] = []  # the student copied it into a fresh cell: tag lost
    nbformat.write(nb, str(path))
    report, results = grade(path, questions=("1",))
    assert_results(results, TOKENIZE, VOCAB, "not a graded cell", "move it")


def test_infinite_loop_in_one_function(tmp_path, chunks):
    looping = edit(chunks, "tokenize", "    return re.findall(", "    while True:\n        pass\n    return re.findall(")
    report, results = grade(write_py(tmp_path, looping))
    assert_results(results, TOKENIZE, [*VOCAB, *Q3], "did not finish", "tokenize(")


@pytest.mark.usefixtures("policy_off")
def test_sys_exit_at_import(tmp_path, chunks):
    exiting = {**chunks, "build_vocab": "import sys\nsys.exit('stop here')\n" + chunks["build_vocab"]}
    report, results = grade(write_notebook(tmp_path, exiting))
    assert_results(results, VOCAB, [*TOKENIZE, *Q3], "SystemExit", "build_vocab")
    assert any("SystemExit" in note and "while loading" in note and "(defining `build_vocab`" in note
               for note in report.notes), report.notes


@pytest.mark.usefixtures("policy_off")
def test_sys_exit_at_the_end_of_a_py_file_costs_nothing(tmp_path, chunks):
    path = write_py(tmp_path, chunks)
    path.write_text(path.read_text() + "\nimport sys\nsys.exit(0)\n")
    report, results = grade(path, questions=("1",))
    assert all(r.passed for r in report.results)
    assert any("SystemExit" in note for note in report.notes)


@pytest.mark.usefixtures("policy_off")
def test_os_exit_at_import(tmp_path, chunks):
    exiting = {**chunks, "tokenize": chunks["tokenize"] + "\nimport os\nos._exit(0)\n"}
    report, results = grade(write_notebook(tmp_path, exiting))
    assert_results(results, TOKENIZE, [*VOCAB, *Q3], "exited", "skipped", "tokenize")
    assert any("skipped" in note for note in report.notes), report.notes


def test_training_loop_at_import_is_skipped(tmp_path, chunks):
    slow = {**chunks, "tokenize": chunks["tokenize"] + "\nwhile True:\n    pass\n"}
    report = runner.grade(write_notebook(tmp_path, slow), NGRAM, questions={"1"},
                          limits=Limits(call_timeout=2, load_timeout=2))
    results = {r.name: r for r in report.results}
    assert_results(results, TOKENIZE, VOCAB, "time limit", "skipped")
    # the note names the cell as the student sees it in Jupyter, not only by a position
    assert any("(defining `tokenize`)" in n and "was skipped" in n for n in report.notes), report.notes


def test_huge_memory_allocation_in_one_function(tmp_path, chunks):
    greedy = edit(chunks, "build_vocab", "    counts = Counter(", "    buffer = bytearray(20 * 10**9)\n    counts = Counter(")
    report, results = grade(write_py(tmp_path, greedy))
    assert_results(results, VOCAB, [*TOKENIZE, *Q3], "MemoryError", "build_vocab")


def test_exception_in_one_function_shows_only_the_students_frames(tmp_path, chunks):
    failing = edit(chunks, "tokenize", "    return re.findall(", "    raise ValueError('my own bug')\n    return re.findall(")
    report, results = grade(write_notebook(tmp_path, failing), questions=("1",))
    assert_results(results, TOKENIZE, VOCAB, "ValueError", "my own bug", "graded cell")
    output = results["public_tokenize"].output
    assert "autograder/" not in output and "hidden_checks" not in output and "worker.py" not in output


@pytest.mark.usefixtures("policy_off")
def test_everything_broken_at_once_still_grades(tmp_path, chunks):
    broken = edit(chunks, "tokenize", "    return re.findall(", "    return 1 / 0\n    return re.findall(")
    broken = edit(broken, "replace_oov", "return [", "return [[")
    broken = {**broken, "build_vocab": "import os\nos._exit(1)\n" + broken["build_vocab"]}
    broken = edit(broken, "perplexity", "    total_logprob = ", "    x = bytearray(20 * 10**9)\n    total_logprob = ")
    report, results = grade(write_notebook(tmp_path, broken), questions=("1", "3", "4"))
    assert not any(results[n].passed for n in (*TOKENIZE, *VOCAB, "perplexity_hidden"))
    assert results["public_ngram_prob"].passed and results["mle_hidden"].passed and results["chain_rule"].passed
    json.dumps([r.__dict__ for r in report.results])  # the report stays plain data
