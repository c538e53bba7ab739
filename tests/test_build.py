"""Single source per assignment: generated files are current, starters leak no solution."""
import json

import pytest

from autograder import assignments, build, source
from autograder.extract import GRADED_MARKER

ASSIGNMENTS = [a.id for a in assignments.available()]


def test_committed_generated_files_are_current():
    stale = build.build(check=True)
    assert stale == [], f"run `lmgrade build`: stale {stale}"


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_starter_contains_no_solution_code(assignment_id):
    """No run of three solution lines appears in the starter (single lines may, e.g. in demos)."""
    assignment = assignments.get(assignment_id)
    cells = source.parse(assignment.source_path.read_text())
    starter = json.loads(assignment.starter_path.read_text())
    starter_lines = [line.strip() for c in starter["cells"] if c["cell_type"] == "code"
                     for line in "".join(c["source"]).splitlines() if line.strip()]
    starter_runs = {tuple(starter_lines[i:i + 3]) for i in range(len(starter_lines))}
    regions = [[line.strip() for line in source.solution_lines(c.text) if line.strip()] for c in cells if c.kind == "code"]
    assert any(regions), "the source has no solution regions"
    leaked = [run for lines in regions for run in (tuple(lines[i:i + 3]) for i in range(len(lines) - 2))
              if run in starter_runs]
    assert leaked == []
    solution_only = [c.text for c in cells if c.kind == "code" and "solution" in c.tags]
    assert not any(text.strip() in "\n".join(starter_lines) for text in solution_only)


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_starter_has_no_outputs_and_marked_graded_cells(assignment_id):
    nb = json.loads(assignments.get(assignment_id).starter_path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    graded = [c for c in code if "graded" in c.get("metadata", {}).get("tags", [])]
    assert graded and all("".join(c["source"]).startswith(GRADED_MARKER) for c in graded)
    assert all("raise NotImplementedError(" in "".join(c["source"]) for c in graded if "def " in "".join(c["source"]))
    assert nb["metadata"]["lmgrade"]["assignment"] == assignment_id


def test_regions_become_stubs_with_their_hint():
    code = ("def f(x):\n    \"\"\"Doc.\"\"\"\n    # BEGIN SOLUTION: f: add one\n    y = x + 1\n    return y\n"
            "    # END SOLUTION\n")
    assert source.starter_code(code) == "def f(x):\n    \"\"\"Doc.\"\"\"\n    raise NotImplementedError('f: add one')"
    assert source.solution_code(code) == "def f(x):\n    \"\"\"Doc.\"\"\"\n    y = x + 1\n    return y"
    assert source.solution_lines(code) == ["    y = x + 1", "    return y"]


@pytest.mark.parametrize("bad", ["    # BEGIN SOLUTION\n    x = 1\n", "    x = 1\n    # END SOLUTION\n",
                                 "# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n"])
def test_unbalanced_regions_are_errors(bad):
    with pytest.raises(source.SourceError):
        source.starter_code(bad)


def test_percent_cells_kinds_and_tags():
    text = ('# %% [markdown]\n# # Title\n#\n# Text\n\n# %% tags=["graded"]\ndef f():\n    return 1\n\n'
            '# %%\nprint(f())\n\n# %% tags=["solution"]\nx = 2\n')
    cells = source.parse(text)
    assert [(c.kind, c.tags) for c in cells] == [("markdown", []), ("code", ["graded"]), ("code", []), ("code", ["solution"])]
    assert cells[0].text == "# Title\n\nText"


def test_stale_file_is_reported_and_rewritten(tmp_path, monkeypatch):
    """Editing a generated file by hand is caught by --check and undone by build."""
    assignment = assignments.get("ngram")
    files = build.generated_files(assignment)
    path = assignment.starter_path
    original = path.read_text()
    try:
        path.write_text(original.replace("NotImplementedError", "NotImplementedErr", 1))
        assert path in build.build(check=True, assignments=[assignment])
        build.build(assignments=[assignment])
        assert path.read_text() == files[path]
    finally:
        path.write_text(original)


def test_solutions_notebooks_are_written_with_starter_names(tmp_path):
    build.build(solutions_dir=tmp_path)
    for assignment_id in ASSIGNMENTS:
        nb = json.loads((tmp_path / f"{assignment_id}.ipynb").read_text())
        assert nb["metadata"]["lmgrade"]["variant"] == "solution"
        assert not any("NotImplementedError(" in "".join(c["source"]) for c in nb["cells"]
                       if "graded" in c.get("metadata", {}).get("tags", []))


def test_fixtures_differing_in_last_float32_bits_are_current(tmp_path):
    """A clone on another CPU (other BLAS kernels) finds the committed fixtures current."""
    committed = assignments.get("attention").fixtures_path.read_text()
    doc = json.loads(committed)
    floats = [(key, spec) for key, tree in doc.items() for spec in tree["arrays"]
              if spec["dtype"] == "<f4" and any(isinstance(x, float) and x != 0 for x in spec["data"])]
    assert floats, "the attention fixtures hold float32 arrays"
    key, spec = floats[0]
    i = next(i for i, x in enumerate(spec["data"]) if isinstance(x, float) and x != 0)
    original = spec["data"][i]
    spec["data"][i] = original * (1 + 3e-7)  # a few float32 ulps
    assert build.same_fixtures(committed, json.dumps(doc))
    spec["data"][i] = original * 1.01  # a real change in an expected value
    assert not build.same_fixtures(committed, json.dumps(doc))
    del doc[key]
    assert not build.same_fixtures(committed, json.dumps(doc))
