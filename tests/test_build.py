"""Single source per assignment: generated files are current, starters leak no solution."""
import json
import os
import subprocess
import sys

import pytest
import torch

from autograder.authoring import assignments, build, source
from autograder.checking.checks import Context
from autograder.sandbox.extract import GRADED_MARKER

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


def test_percent_cells_keep_blank_lines_inside_and_magics_as_written():
    """Read by jupytext: blank lines around a cell go, inside stay; `# %cmd` and `#` lines are not rewritten."""
    text = '# %%\n\n\nx = 1\n\n\ny = 2\n\n\n\n# %%\n# %matplotlib inline\n\n# %% [markdown]\n# a\n#\n#  b\n\n# %%\n\n'
    cells = source.parse(text)
    assert [c.text for c in cells] == ["x = 1\n\n\ny = 2", "# %matplotlib inline", "a\n\n b"]


@pytest.mark.parametrize("header", ['# %% tags=["graded"', '# %% tags=[graded]', '# %% tags="graded"',
                                    '# %% tags=["graded", 1]', '# %% tags=[["graded"]]', '# %% [markdown] tags=["a"] x=y'])
def test_malformed_tags_are_source_errors_naming_the_line(header):
    with pytest.raises(source.SourceError, match=r"^line 4: .*tags must be a JSON list of strings"):
        source.parse(f'# %%\nx = 1\n\n{header}\ny = 2\n')


def test_stale_file_is_reported_and_rewritten(course_copy):
    """Editing a generated file by hand is caught by --check and undone by build."""
    assignment = assignments.get("ngram")
    files = build.generated_files(assignment)
    path = assignment.starter_path
    assert path.is_relative_to(course_copy)
    path.write_text(path.read_text().replace("NotImplementedError", "NotImplementedErr", 1))
    assert path in build.build(check=True, assignments=[assignment])
    build.build(assignments=[assignment])
    assert path.read_text() == files[path]


def test_solutions_notebooks_are_written_with_starter_names(tmp_path):
    build.build(check=True, solutions_dir=tmp_path)
    for assignment_id in ASSIGNMENTS:
        nb = json.loads((tmp_path / f"{assignment_id}.ipynb").read_text())
        assert nb["metadata"]["lmgrade"]["variant"] == "solution"
        assert not any("NotImplementedError(" in "".join(c["source"]) for c in nb["cells"]
                       if "graded" in c.get("metadata", {}).get("tags", []))


def test_fixtures_moved_by_an_ulp_are_current_and_by_a_check_tolerance_stale():
    """The staleness bounds sit between what differs between CPUs and what a public check tolerates."""
    committed = assignments.get("attention").fixtures_path.read_text()
    doc = json.loads(committed)
    float32 = next(spec for tree in doc.values() for spec in tree["arrays"]
                   if spec["dtype"] == "<f4" and any(isinstance(x, float) and x != 0 for x in spec["data"]))
    float64 = next(spec for tree in doc.values() for spec in tree["arrays"]
                   if spec["dtype"] == "<f8" and any(isinstance(x, float) and abs(x) > 0.1 for x in spec["data"]))
    for spec, cpu, check in ((float32, 2.0 ** -23, 1e-5), (float64, 1e-14, 1e-8)):
        i = next(i for i, x in enumerate(spec["data"]) if isinstance(x, float) and abs(x) > 0.1)
        original = spec["data"][i]
        spec["data"][i] = original * (1 + cpu)  # as another CPU's kernels may give
        assert build.same_fixtures(committed, json.dumps(doc))
        spec["data"][i] = original * (1 + check)  # as far as a check's tolerance: a real change
        assert not build.same_fixtures(committed, json.dumps(doc))
        spec["data"][i] = original
    key = next(iter(doc))
    doc[key]["arrays"][0]["shape"] = doc[key]["arrays"][0]["shape"][::-1] + [1]  # structure: stale
    assert not build.same_fixtures(committed, json.dumps(doc))
    del doc[key]
    assert not build.same_fixtures(committed, json.dumps(doc))


class DisturbedNumerics(torch.overrides.TorchFunctionMode):
    """Every floating result off by a relative amount far beyond what differs between CPUs.

    The amount is a function of the value (equal values stay equal, as exact ties do on any CPU).
    Operations that compute nothing, or round once (IEEE 754 arithmetic on two operands), give the
    same bits on every CPU and are left alone; sums, products of matrices and transcendental
    functions are what differ between kernels.
    """

    RELATIVE = {torch.float32: 1e-4, torch.float64: 1e-13}
    EXACT = {"tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "zeros_like",
             "ones_like", "full_like", "empty_like", "clone", "detach", "to", "double", "float", "contiguous",
             "view", "reshape", "permute", "transpose", "t", "__getitem__", "squeeze", "unsqueeze", "expand",
             "flatten", "cat", "stack", "masked_fill", "where", "tril", "triu", "__get__",
             "add", "sub", "mul", "div", "neg", "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
             "__truediv__", "__rtruediv__", "__neg__"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", "")
        if (not isinstance(out, torch.Tensor) or isinstance(out, torch.nn.Parameter) or name.endswith("_")
                or out.dtype not in self.RELATIVE or name in self.EXACT or name.startswith("__set")):
            return out
        value = out.detach().double()
        noise = torch.where(value.isfinite(), torch.sin(torch.frexp(value).mantissa * 1e4), 0.0)  # a function of the value
        return out * (1 + self.RELATIVE[out.dtype] * noise).to(out.dtype)


def test_fixtures_recorded_under_disturbed_numerics_are_current(monkeypatch):
    """Portability without a second CPU: recorded values computed with every float32 result off by
    1e-4 and every float64 result by 1e-13 still match the committed fixtures."""
    recording = Context.expected

    def disturbed(self, key, compute):
        def run(ref):
            with DisturbedNumerics():
                return compute(ref)
        return recording(self, key, run)

    monkeypatch.setattr(Context, "expected", disturbed)
    for assignment in assignments.available():
        reference = build.module_from_text(f"disturbed_{assignment.id}", build.reference_module(assignment))
        fresh = build.public_fixtures(assignment, reference)
        assert build.same_fixtures(assignment.fixtures_path.read_text(), fresh), assignment.id


@pytest.mark.parametrize("assignment_id, constant, changed", [
    ("transformer", "eps=1e-5", "eps=2e-5"),  # LayerNorm's epsilon: a float32 check
    ("attention", "base=10000.0", "base=10001.0"),  # RoPE's base: a float64 check
])
def test_a_real_edit_of_a_reference_constant_is_stale(assignment_id, constant, changed):
    assignment = assignments.get(assignment_id)
    text = build.reference_module(assignment)
    assert constant in text
    edited = build.module_from_text(f"edited_{assignment_id}", text.replace(constant, changed))
    assert not build.same_fixtures(assignment.fixtures_path.read_text(), build.public_fixtures(assignment, edited))


def test_build_check_passes_with_other_cpu_kernels():
    """The kernels that differ between CPUs are chosen at run time: force the scalar and SSE4.2 ones."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2"}
    done = subprocess.run([sys.executable, "-m", "autograder", "build", "--check"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_check_declarations_read_from_the_text_equal_the_imported_ones():
    """A batch's dispatcher reads the declarations without importing the checks (and torch)."""
    for assignment in assignments.available():
        assert assignment.check_specs() == [fn.lmgrade_check for fn in assignment.checks()], assignment.id


def test_a_declaration_that_is_not_literal_is_imported_instead(tmp_path):
    from autograder.checking.checks import declared
    literal, computed = tmp_path / "literal.py", tmp_path / "computed.py"
    literal.write_text("USES = ('f',)\nN = 3\n@check(1, 2, f'title of {N:g}', public=True, uses=USES + ('g',))\n"
                       "def a(t):\n    pass\n\ndef helper():\n    pass\n")
    computed.write_text("import math\n@check(1, math.floor(2.5), \"title\")\ndef a(t):\n    pass\n")
    (spec,) = declared(literal)
    assert (spec.name, spec.question, spec.points, spec.title, spec.public, spec.uses) == \
        ("a", "1", 2.0, "title of 3", True, ("f", "g"))
    assert declared(computed) is None
