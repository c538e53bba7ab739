"""Taking graded cells out of submissions, without running anything, and explaining what went wrong."""
import json
import re
import time

import nbformat
import pytest

from autograder.sandbox.extract import GRADED_MARKER, NotebookError, cell_label, json_depth, parse_notebook, read_submission


def code(source: str, graded: bool = False):
    cell = nbformat.v4.new_code_cell(source)
    if graded:
        cell.metadata["tags"] = ["graded"]
    return cell


def write_nb(tmp_path, cells, name="sub.ipynb"):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


def sources(sub) -> list[str]:
    return [c.source for c in sub.cells]


def notes(sub) -> str:
    return "\n".join(sub.notes)


# ---- which cells are graded -----------------------------------------------------------------
def test_graded_cells_by_tag_and_by_visible_marker(tmp_path):
    path = write_nb(tmp_path, [
        nbformat.v4.new_markdown_cell("# Homework\n" + GRADED_MARKER + " (markdown never counts)"),
        code("def tagged():\n    return 1\n", graded=True),
        code("x = train_for_an_hour()\n"),  # exploration: never graded, never run
        code(f"{GRADED_MARKER}: question 2\ndef marked():\n    return 2\n"),  # tags lost, marker kept
        code(f"\n  {GRADED_MARKER}\ndef marked_after_blank():\n    return 3\n"),
        code("# graded cell (lower case is not the marker)\ndef not_graded():\n    pass\n"),
    ])
    sub = read_submission(path)
    assert sub.unreadable is None
    assert [(c.index, c.number) for c in sub.cells] == [(1, 1), (3, 2), (4, 3)]  # number: among graded cells
    assert sub.graded_names == {"tagged", "marked", "marked_after_blank"}
    assert "train_for_an_hour" not in "".join(sources(sub))
    assert sub.ungraded_names.get("x") == 3 and sub.ungraded_names.get("not_graded") == 6
    assert sub.explain_missing("not_graded").startswith("`not_graded` is defined in the cell defining `not_graded`, "
                                                         "which is not a graded cell")
    assert sub.notes == []


def test_cell_wire_form(tmp_path):
    sub = read_submission(write_nb(tmp_path, [code("a = 1"), code("def f(): pass", graded=True)]))
    assert sub.cells[0].wire() == {"index": 1, "number": 1, "source": "def f(): pass", "name": "graded cell defining `f`"}


def test_other_tags_and_odd_metadata_are_tolerated(tmp_path):
    doc = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {"tags": ["graded", "hide-input"]}, "source": ["def a():\n", "    return 1\n"],
         "outputs": [], "execution_count": None},
        {"cell_type": "code", "metadata": {"tags": "graded"}, "source": "def b(): pass"},  # tags not a list
        {"cell_type": "code", "metadata": None, "source": "def c(): pass"},
        "not a cell",
        {"cell_type": "code", "source": ["def d(): pass", 7]},  # junk in the source list
        {"cell_type": "raw", "metadata": {"tags": ["graded"]}, "source": "def e(): pass"},
    ]}
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps(doc))
    sub = read_submission(path)
    assert sub.unreadable is None
    assert sub.graded_names == {"a"}
    assert sources(sub) == ["def a():\n    return 1\n"]


# ---- unreadable files -----------------------------------------------------------------------
def test_invalid_json_is_unreadable_with_line_and_column(tmp_path):
    path = write_nb(tmp_path, [code("def f():\n    return 1\n", graded=True)])
    text = path.read_text()
    broken = text.replace('"cells": [', '"cells": [,', 1)  # a stray comma, as a bad merge leaves
    path.write_text(broken)
    line = broken[:broken.index('[,')].count("\n") + 1
    sub = read_submission(path)
    assert sub.cells == [] and sub.unreadable
    assert "not valid JSON" in sub.unreadable
    assert f"line {line}" in sub.unreadable and "column" in sub.unreadable
    assert "save it again" in sub.unreadable  # tells the student what to do
    assert sub.explain_missing("f") == sub.unreadable


def test_truncated_notebook_is_unreadable(tmp_path):
    path = write_nb(tmp_path, [code("def f(): pass", graded=True)])
    path.write_bytes(path.read_bytes()[:40])
    sub = read_submission(path)
    assert sub.unreadable and "not valid JSON" in sub.unreadable and sub.cells == []


@pytest.mark.parametrize("doc", [[1, 2], {"cells": "def f(): pass"}, {"worksheets": []}, "just a string", 3])
def test_json_that_is_not_a_notebook(tmp_path, doc):
    path = tmp_path / "sub.ipynb"
    path.write_text(json.dumps(doc))
    sub = read_submission(path)
    assert sub.unreadable and "not a Jupyter notebook" in sub.unreadable and sub.cells == []


def test_missing_file_is_unreadable(tmp_path):
    sub = read_submission(tmp_path / "nope.ipynb")
    assert sub.unreadable and "could not read" in sub.unreadable


# ---- syntax errors --------------------------------------------------------------------------
def test_syntax_error_breaks_only_its_own_cell(tmp_path):
    path = write_nb(tmp_path, [
        nbformat.v4.new_markdown_cell("intro"),
        code("def good():\n    return 1\n", graded=True),
        code("import math\n\ndef bad_one(x):\n    return x +\n\nclass BadClass:\n    def method(self):\n        pass\n",
             graded=True),
        code("def also_good():\n    return good() + 1\n", graded=True),
    ])
    sub = read_submission(path)
    assert sources(sub) == ["def good():\n    return 1\n", "def also_good():\n    return good() + 1\n"]
    assert sub.graded_names == {"good", "also_good"}
    assert set(sub.broken) == {"bad_one", "BadClass"}  # top-level names only, not the method
    why = sub.broken["bad_one"]
    assert "syntax error" in why and "graded cell 2" in why and "line 4" in why  # the second graded cell
    assert why.startswith("`bad_one` is in graded cell 2 (defining `bad_one`, `BadClass`), which has a syntax error")
    assert sub.explain_missing("bad_one") == why
    assert any(n.startswith("Graded cell 2 (defining `bad_one`, `BadClass`) has a syntax error at line 4") for n in sub.notes)


def test_unterminated_string_and_tab_errors_are_syntax_errors_too(tmp_path):
    path = write_nb(tmp_path, [
        code('def f():\n    return """never closed\n', graded=True),
        code("def g():\n\tif True:\n        return 1\n\treturn 2\n", graded=True),
        code("def ok():\n    return 0\n", graded=True),
    ])
    sub = read_submission(path)
    assert set(sub.broken) == {"f", "g"}
    assert sub.graded_names == {"ok"}


# ---- IPython magics -------------------------------------------------------------------------
def test_magics_are_dropped_with_notes(tmp_path):
    path = write_nb(tmp_path, [
        code("%time x = 1\n!pip install numpy\n  %matplotlib inline\ndef f(a):\n    return a + 1\n", graded=True),
        code("%%timeit\ndef g():\n    pass\n", graded=True),
        code("def h():\n    return 2\n", graded=True),
    ])
    sub = read_submission(path)
    assert sub.graded_names == {"f", "h"} and sub.broken == {}
    f_source = sub.cells[0].source
    assert "%" not in f_source and "!" not in f_source and "pip" not in f_source
    assert f_source.count("\n") == 5  # line numbers in tracebacks still match the notebook
    text = notes(sub)
    assert "Graded cell 1 (defining `f`): 3 line(s)" in text and "magics" in text
    assert "Graded cell 2 (defining `g`): a cell magic" in text
    compile(f_source, "cell", "exec")


def test_percent_that_continues_an_expression_is_not_a_magic(tmp_path):
    """`%` or `!` at the start of a line inside brackets is Python (modulo, !=), not IPython syntax."""
    body = "def k(a, b):\n    return (a\n            % b)\n\ndef ne(a, b):\n    return (a\n            != b)\n"
    path = write_nb(tmp_path, [code(body, graded=True), code("%time y = 2\n" + body.replace("k(", "k2(").replace("ne(", "ne2("), graded=True)])
    sub = read_submission(path)
    assert sub.broken == {}
    assert sub.cells[0].source == body and notes(sub).count("line(s)") == 1
    ns: dict = {}
    exec(sub.cells[1].source, ns)
    assert ns["k2"](7, 4) == 3 and ns["ne2"](1, 2) is True


def test_magic_like_line_inside_a_string_is_kept(tmp_path):
    body = 'def doc():\n    """Share of tokens:\n    % of all, or\n    !important\n    """\n    return 1\n%time doc()\n'
    sub = read_submission(write_nb(tmp_path, [code(body, graded=True)]))
    assert sub.broken == {}
    assert "% of all" in sub.cells[0].source and "!important" in sub.cells[0].source
    assert "%time" not in sub.cells[0].source


# ---- names from ungraded cells, duplicates --------------------------------------------------
def test_graded_function_using_a_name_from_an_ungraded_cell_gets_a_note(tmp_path):
    path = write_nb(tmp_path, [
        code("import numpy as np\nEPS = 1e-9\ndef helper(x):\n    return x\n"),
        code("def f(x):\n    y = helper(x) + EPS\n    for i in range(3):\n        y += i\n    return y\n", graded=True),
        code("def g(values):\n    return len(values)\n", graded=True),
    ])
    sub = read_submission(path)
    text = notes(sub)
    assert "`helper`, which is defined only in the cell defining `helper` (not graded)" in text
    assert "`EPS`, which is defined only in the cell defining `helper` (not graded)" in text
    # locals, parameters, builtins and graded names get no note
    for name in ("`y`", "`i`", "`x`", "`range`", "`len`", "`values`", "`np`"):
        assert name not in text
    assert sub.ungraded_names["helper"] == 1


def test_duplicate_graded_definitions_note_and_later_wins(tmp_path):
    path = write_nb(tmp_path, [
        code("def f():\n    return 'first'\n", graded=True),
        code("x = f()\n"),
        code("def f():\n    return 'second'\n", graded=True),
    ])
    sub = read_submission(path)
    assert "`f` is defined in graded cells 1 and 2; the later one is graded." in sub.notes  # as headers count
    ns: dict = {}
    for cell in sub.cells:  # the worker runs graded cells in notebook order
        exec(cell.source, ns)
    assert ns["f"]() == "second"


# ---- encodings and .py files ----------------------------------------------------------------
def test_non_utf8_bytes_give_a_note_and_are_still_graded(tmp_path):
    path = write_nb(tmp_path, [code("def f():\n    return 'caf\u00e9'\n", graded=True)])
    raw = path.read_bytes().replace("caf\u00e9".encode(), b"caf\xe9")  # latin-1 byte inside a string
    path.write_bytes(raw)
    sub = read_submission(path)
    assert sub.unreadable is None and sub.graded_names == {"f"}
    assert any("not valid UTF-8" in n for n in sub.notes)


def test_genuine_replacement_character_gives_no_note(tmp_path):
    path = tmp_path / "sub.py"
    path.write_text("def f():\n    return '\ufffd'\n", encoding="utf-8")
    sub = read_submission(path)
    assert sub.notes == [] and sub.graded_names == {"f"}


def test_non_utf8_py_file(tmp_path):
    path = tmp_path / "sub.py"
    path.write_bytes(b"# caf\xe9\ndef f():\n    return 1\n")
    sub = read_submission(path)
    assert sub.graded_names == {"f"} and any("UTF-8" in n for n in sub.notes)


def test_py_file_without_percent_markers_is_one_graded_cell(tmp_path):
    path = tmp_path / "sub.py"
    text = "import re\n\ndef tokenize(line):\n    return line.split()\n\nclass Model:\n    pass\n"
    path.write_text(text)
    sub = read_submission(path)
    assert sources(sub) == [text] and sub.cells[0].number == 1
    assert sub.graded_names == {"re", "tokenize", "Model"} and sub.notes == []


def test_py_file_with_percent_markers_keeps_only_graded_cells(tmp_path):
    path = tmp_path / "sub.py"
    path.write_text(
        "# %% [markdown]\n# # Title\n# def not_code(): pass\n"
        "# %%\nimport numpy as np\nSEEN = 1\n"
        '# %% tags=["graded"]\n# GRADED CELL\ndef f(x):\n    return x\n'
        "# %%\nf(3)  # exploration\n"
        '# %% tags=["graded", "other"]\n%time z = 1\ndef g():\n    return SEEN\n'
    )
    sub = read_submission(path)
    assert sub.graded_names == {"f", "g"}
    assert sub.cells[0].source == "# GRADED CELL\ndef f(x):\n    return x\n"
    assert [c.number for c in sub.cells] == [1, 2]
    assert "f(3)" not in "".join(sources(sub))
    assert "not_code" not in sub.ungraded_names
    text = notes(sub)
    assert "Graded cell 2 (defining `g`): 1 line(s)" in text
    assert "`SEEN`, which is defined only in the cell starting `import numpy as np` (not graded)" in text


def test_percent_syntax_error_breaks_only_that_cell(tmp_path):
    path = tmp_path / "sub.py"
    path.write_text('# %% tags=["graded"]\ndef f(:\n    pass\n# %% tags=["graded"]\ndef g():\n    return 1\n')
    sub = read_submission(path)
    assert sub.graded_names == {"g"} and "syntax error" in sub.broken["f"] and "graded cell 1" in sub.broken["f"]


def test_syntax_error_in_a_plain_py_file(tmp_path):
    path = tmp_path / "sub.py"
    path.write_text("def f():\n    return 1\n\ndef g(:\n    pass\n")
    sub = read_submission(path)
    assert sub.cells == [] and set(sub.broken) == {"f", "g"}
    assert "line 4" in sub.broken["f"]
    assert "No graded cells" not in notes(sub)  # the syntax error is the note, not a missing cell


# ---- no graded cells at all -----------------------------------------------------------------
@pytest.mark.parametrize("cells", [
    [code("def f():\n    return 1\n")],  # tags and marker lost: retyped in a fresh cell
    [code("# graded\ndef f():\n    return 1\n"), nbformat.v4.new_markdown_cell(GRADED_MARKER)],
])
def test_no_graded_cells_gives_a_note(tmp_path, cells):
    sub = read_submission(write_nb(tmp_path, cells))
    assert sub.cells == [] and sub.unreadable is None
    assert any("No graded cells were found" in n and GRADED_MARKER in n for n in sub.notes)
    if cells and cells[0].cell_type == "code":
        assert "is defined in the cell defining `f`, which is not a graded cell" in sub.explain_missing("f")
    assert "does not define `nothing`" in sub.explain_missing("nothing")


def test_extraction_never_runs_code(tmp_path):
    marker = tmp_path / "ran"
    path = write_nb(tmp_path, [
        code(f"open({str(marker)!r}, 'w').write('x')\n", graded=True),
        code(f"open({str(marker)!r}, 'w').write('y')\n"),
    ])
    read_submission(path)
    assert not marker.exists()


def test_assigned_shell_commands_and_help_are_dropped(tmp_path):
    path = write_nb(tmp_path, [code("files = !ls\nt = %timeit -o f(1)\nf?\nnp.mean??\ndef f(a):\n    return a\n", graded=True)])
    sub = read_submission(path)
    assert sub.graded_names == {"f"} and sub.broken == {}
    assert "Graded cell 1 (defining `f`): 4 line(s)" in notes(sub)


def test_percent_file_with_visible_markers_but_no_tags(tmp_path):
    """A VS Code export keeps the visible marker but may drop tags: exploration cells stay ungraded."""
    path = tmp_path / "hw.py"
    path.write_text("# %%\nexplore = train_for_an_hour()\n\n# %%\n# GRADED CELL: graded by name.\ndef f():\n    return 1\n")
    sub = read_submission(path)
    assert sub.graded_names == {"f"} and len(sub.cells) == 1


def test_hostile_percent_headers_are_read_at_once(tmp_path):
    """Untrusted .py headers: a 200 KB header line and malformed tags, over which jupytext.reads takes
    minutes or raises (see `_percent_cells`), are read in well under a second and grade what parses."""
    path = tmp_path / "hw.py"
    path.write_text('# %% tags=["graded"] ' + "a=b " * 50_000 + "\ndef f():\n    return 1\n"
                    '# %% tags=["graded", 1]\ndef g():\n    return 2\n'
                    '# %% tags=["graded", ' + "[" * 5000 + "\ndef h():\n    return 3\n"
                    + '# %% tags=["graded"\nx = (\n' * 5000)
    start = time.perf_counter()
    sub = read_submission(path)
    assert time.perf_counter() - start < 10  # about 0.1 s; jupytext.reads spends about a minute on the first line alone
    assert {"f", "g", "h"} <= sub.graded_names and sub.unreadable is None


# ---- one bounded parse, unreadable and wrong-assignment notebooks, cell labels ---------------
def test_a_deeply_nested_notebook_is_unreadable_not_a_crash(tmp_path):
    path = tmp_path / "deep.ipynb"  # 985 levels: json.loads alone raises RecursionError
    path.write_text('{"cells": [], "metadata": {"x": ' + "[" * 985 + "]" * 985 + "}}")
    sub = read_submission(path)
    assert sub.cells == [] and "nested more than" in sub.unreadable
    assert sub.problem("ngram")[0] == "unreadable"
    with pytest.raises(NotebookError, match="nested more than"):
        parse_notebook(path.read_bytes())


def test_json_depth_skips_brackets_inside_strings():
    assert json_depth('{"a": [1, {"b": "[[[[{{{{"}]}') == 3
    assert json_depth('["\\\\", "\\"[", []]') == 2
    assert json_depth("") == 0


@pytest.mark.parametrize("content", ["", "  \n", '{"cells": [], "metadata": {}}'])
def test_an_empty_notebook_is_unreadable(tmp_path, content):
    path = tmp_path / "empty.ipynb"
    path.write_text(content)
    status, message = read_submission(path).problem("ngram")
    assert status == "unreadable" and "empty" in message


def test_an_empty_py_file_is_unreadable(tmp_path):
    path = tmp_path / "empty.py"
    path.write_text("\n\n")
    assert read_submission(path).problem("ngram")[0] == "unreadable"


def test_another_assignments_notebook_is_the_wrong_assignment(tmp_path):
    path = write_nb(tmp_path, [code("def f():\n    return 1\n", graded=True)])
    nb = json.loads(path.read_text())
    nb["metadata"]["lmgrade"] = {"assignment": "attention"}
    path.write_text(json.dumps(nb))
    sub = read_submission(path)
    assert sub.assignment == "attention" and sub.problem("attention") is None
    status, message = sub.problem("ngram")
    assert status == "wrong assignment" and "`attention`" in message and "ngram.ipynb" in message
    nb["metadata"]["lmgrade"] = {"assignment": ["not", "a", "name"]}  # odd metadata: ignored
    path.write_text(json.dumps(nb))
    assert read_submission(path).problem("ngram") is None


def test_cells_are_named_by_what_jupyter_shows(tmp_path):
    path = write_nb(tmp_path, [
        nbformat.v4.new_markdown_cell("# intro"),
        code(f"{GRADED_MARKER}: question 2\ndef count_ngrams(tokens, n):\n    return {{}}\n", graded=True),
        code(f"{GRADED_MARKER}\n\nVOCAB_SIZE = 1000  # a constant with a very long comment that goes on and on\n",
             graded=True),
    ])
    sub = read_submission(path)
    assert sub.cells[0].label == "graded cell 1 (defining `count_ngrams`)"  # the first `# GRADED CELL` from the top
    assert sub.cells[1].label.startswith("graded cell 2 (starting `VOCAB_SIZE = 1000") and sub.cells[1].label.endswith("...`)")
    assert cell_label(4, "x = 1", graded=False) == "the cell starting `x = 1`"  # no header to count: its content
    assert cell_label(5, "def a(): pass\ndef b(): pass\nclass C: pass\ndef d(): pass") == \
        "graded cell 5 (defining `a`, `b`, `C` and 1 more)"


def test_json_depth_is_linear_on_text_built_to_make_it_backtrack():
    import time
    for text in ('[' + '\\"' * 500_000 + ']', '["' + 'a"' * 500_000 + "]", "[" * 1_000_000):
        started = time.perf_counter()
        json_depth(text)
        assert time.perf_counter() - started < 10  # a backtracking pattern takes hours here


def test_a_quick_look_reads_the_file_but_not_the_cells(tmp_path):
    path = write_nb(tmp_path, [code("def f():\n    return 1\n", graded=True)])
    quick, full = read_submission(path, analyse=False), read_submission(path)
    assert quick.unreadable is None and quick.cells == [] and quick.problem("ngram") is None
    assert [c.source for c in full.cells] == ["def f():\n    return 1\n"]


def test_graded_cells_are_counted_as_the_student_sees_their_headers(tmp_path):
    """In a real starter, the third cell headed `# GRADED CELL` is "graded cell 3" in every message,
    though markdown and ungraded cells before it put it much further down the notebook."""
    from autograder.authoring import assignments
    nb = nbformat.read(assignments.get("ngram").starter_path, as_version=4)
    graded = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "graded" in c.metadata.get("tags", [])]
    third = graded[2]
    assert third + 1 > 3  # its position among all cells is not what a student counts
    defined = re.findall(r"^def (\w+)", nb.cells[third].source, re.M)
    nb.cells[third].source += "\ndef broken(:\n    pass\n"
    path = tmp_path / "ngram.ipynb"
    nbformat.write(nb, path)
    sub = read_submission(path)
    [note] = [n for n in sub.notes if "syntax error" in n]
    assert note.startswith(f"Graded cell 3 (defining `{defined[0]}`"), note
    assert sub.broken[defined[0]].startswith(f"`{defined[0]}` is in graded cell 3 (")
    assert [c.number for c in sub.cells] == [n for n in range(1, len(graded) + 1) if n != 3]
