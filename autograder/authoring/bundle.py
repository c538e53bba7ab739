"""The student bundle: what students download, and nothing the grader keeps to itself.

`lmgrade build --student-bundle DIR` writes, for each chosen assignment, the starter notebook, the
public checks with their fixtures and meta.toml, the engine package `autograder` with a
`pyproject.toml` (one command, `pip install -e .`, installs it and its dependencies), and the
prepared train and validation splits. Never: `solutions/`, hidden checks, `source.py`, or the
test split. The folder mirrors the repository's layout so that the engine, installed editable from
it, finds the assignments next to itself (`assignments.ROOT`).
"""
from __future__ import annotations

import configparser
import importlib.metadata
import shlex
import shutil
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.authoring import build
from autograder.authoring import assignments as course
from autograder.authoring.assignments import Assignment, available
from autograder.data import shakespeare

MARKER = ".lmgrade-bundle"  # lets a rebuild replace an old bundle, and only a bundle
# Files of an assignment folder that students get (everything else stays with the grader).
PUBLIC_FILES = ("meta.toml", "public_checks.py")


class BundleError(RuntimeError):
    pass


def engine_files() -> dict[str, bytes]:
    """The engine package as {path relative to its parent: bytes}, without caches."""
    files = {}
    for path in sorted(PACKAGE_DIR.rglob("*")):
        rel = path.relative_to(PACKAGE_DIR.parent)
        if path.is_file() and not any(p == "__pycache__" or p.startswith(".") for p in rel.parts) \
                and path.suffix != ".pyc":
            files[rel.as_posix()] = path.read_bytes()
    return files


def engine_dependencies() -> list[str]:
    """The engine's runtime requirements: setup.cfg's ranges (its single source), else the installed metadata."""
    cfg = course.ROOT / "setup.cfg"
    if cfg.is_file():
        parser = configparser.ConfigParser()
        parser.read(cfg)
        return [r.strip() for r in parser.get("options", "install_requires", fallback="").splitlines() if r.strip()]
    requires = importlib.metadata.requires("lmgrade") or []
    return [r for r in requires if "extra ==" not in r]


def engine_pyproject(name: str, dependencies: list[str], comment: str) -> str:
    """A minimal pyproject.toml that installs the package `autograder` (and the `lmgrade` command)."""
    try:
        version = importlib.metadata.version("lmgrade")
    except importlib.metadata.PackageNotFoundError:
        version = "0.0.0"
    deps = "".join(f'    "{d}",\n' for d in dependencies)
    header = "".join(f"# {line}\n" for line in comment.splitlines())
    return (f'{header}[build-system]\nrequires = ["setuptools>=64", "wheel"]\n'
            'build-backend = "setuptools.build_meta"\n\n'
            f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.11"\n'
            f"dependencies = [\n{deps}]\n\n"
            '[project.scripts]\nlmgrade = "autograder.cli:main"\n\n'
            '[tool.setuptools.packages.find]\ninclude = ["autograder", "autograder.*"]\n\n'
            '[tool.setuptools.package-data]\nautograder = ["templates/*"]\n')


def public_files(assignment: Assignment) -> dict[str, str]:
    """The assignment's files students get, as {path relative to the bundle: text}, as committed.

    Why committed, not regenerated: the bundle must match what the checkout holds (recorded values
    may differ in their last bits on this CPU), and making a bundle never writes into the checkout;
    `write` refuses when a generated file is stale.
    """
    names = [*PUBLIC_FILES, assignment.fixtures_path.name]
    out = {f"assignments/{assignment.id}/{name}": (assignment.dir / name).read_text() for name in names}
    out[f"starter_notebooks/{assignment.id}.ipynb"] = assignment.starter_path.read_text()
    return out


def torch_pin() -> str:
    """The torch version the grader runs (requirements.lock), so students test on the same one."""
    lock = course.ROOT / "requirements.lock"
    if lock.is_file():
        for line in lock.read_text().splitlines():
            if line.strip().startswith("torch=="):
                return line.split("==", 1)[1].split()[0]
    try:
        return importlib.metadata.version("torch").split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return "2.13.0"


def install_command(pin: str | None = None) -> str:
    """The one install students run in the bundle (docs/students.md, the bundle's README): the engine,
    JupyterLab and the grader's torch, CPU-only (not several GB of CUDA libraries)."""
    return (f'pip install -e . jupyterlab "torch=={pin or torch_pin()}+cpu" '
            "--extra-index-url https://download.pytorch.org/whl/cpu")


def closing_lines(dest: Path, written: list[Path]) -> str:
    """What `lmgrade build --student-bundle` ends with: where the bundle is, and how to try it as a
    student does (the same install as docs/students.md, not a bare `pip install -e .` that leaves
    students without JupyterLab or pulls a CUDA torch)."""
    return (f"student bundle: {len(written)} files in {dest}; to try it as a student does (docs/students.md):\n"
            f"  cd {shlex.quote(str(dest))} && python -m venv .venv && . .venv/bin/activate\n"
            f"  {install_command()}")


def _readme(chosen: list[Assignment], data_dir: str) -> str:
    rows = "".join(f"| `{a.id}` | {a.title} | `starter_notebooks/{a.id}.ipynb` |\n" for a in chosen)
    pin = torch_pin()
    first = chosen[0].id
    return f"""# Language-model homework: student bundle

| assignment | title | notebook |
| --- | --- | --- |
{rows}
## Install (once, on your own machine)

Python 3.11 or newer. Inside this folder, in a virtual environment (`python -m venv .venv`, then
`source .venv/bin/activate`, or `.venv\\Scripts\\activate` on Windows), one command:

```sh
{install_command(pin)}
```

That is the grader's torch ({pin}), CPU-only (about 290 MB to download with JupyterLab, about 1.3 GB
on disk, instead of several GB of CUDA libraries), the `autograder` package the notebooks use, the `lmgrade` command and JupyterLab. On a
Mac, where torch wheels are CPU-only anyway: `pip install -e . jupyterlab "torch=={pin}"`. Already
have a torch you want to keep? `pip install -e .` alone installs nothing it does not need. Keep
this folder where it is: the package reads the assignments and the data from it.

Open a notebook with `jupyter lab starter_notebooks/{first}.ipynb`, or open the folder in VS Code
(Python and Jupyter extensions) and pick the `.venv` kernel.

## Google Colab

1. Upload this folder to Google Drive (or the zip, then unzip it in a cell).
2. Open `starter_notebooks/<assignment>.ipynb` from Drive with Colab.
3. Run, in the first cell (once per Colab session; no restart needed):

```python
from google.colab import drive; drive.mount("/content/drive")
BUNDLE = "/content/drive/MyDrive/lmgrade-homework"   # where you put this folder
!pip install -q -e {{BUNDLE}}
import sys; sys.path.insert(0, BUNDLE)   # use it now, without restarting the runtime
```

Colab's own torch is kept (nothing is reinstalled). The check cell finds the open notebook by itself.

## Work and check

Fill in the cells marked `# GRADED CELL`. Run the check cell at the end, or any time:

```python
from autograder import check_notebook
check_notebook()             # every public check
check_notebook(question=2)   # only question 2's, quicker while you work on it
```

It grades the **saved** notebook exactly as the grader will (it says which saved version it
checked and how old it is: save first), in a separate process. From a shell:
`lmgrade check starter_notebooks/{first}.ipynb`. These are the public checks only; the hidden
checks on Gradescope decide the score. Submit the notebook (.ipynb) on Gradescope.

## Written answers

Each notebook ends its experiments with written questions (markdown cells under "Written
question N"): type your answers in the cells below them, run the cells that make their figures,
save, and make the PDF that you upload to the written assignment on Gradescope:

```python
from autograder import export_answers
export_answers()             # writes <notebook>-written.pdf beside the notebook
```

or from a shell, `lmgrade export starter_notebooks/{first}.ipynb`. Each question starts a new page
with its figures and your answer. It needs Chromium (or Chrome) installed; without one no PDF is
made: it writes HTML beside the notebook, says so, and you print that to PDF from your browser.

## Data

The notebooks read Shakespeare through `autograder.data.shakespeare` (`lines("train")`,
`lines("validation")`, `text(...)`), from `{data_dir}/` in this folder: train and validation only,
the test plays stay with the grader.
"""


def write(dest: Path, assignments: list[Assignment] | None = None) -> list[Path]:
    """Write the bundle into `dest` (empty, missing, or an earlier bundle); return the files written."""
    chosen = assignments if assignments is not None else [a for a in available() if a.finished]
    if not chosen:
        raise BundleError("no finished assignment to bundle")
    stale = build.build(check=True, assignments=chosen)
    if stale:
        raise BundleError(f"generated files are stale ({', '.join(p.name for p in stale)}): run `lmgrade build`, "
                          "commit, then make the bundle")
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        if not (dest / MARKER).exists():
            raise BundleError(f"{dest} is not empty and is not an earlier student bundle; choose an empty folder")
        shutil.rmtree(dest)
    data_dir = f"data/shakespeare-{shakespeare.version()}"
    files: dict[str, str | bytes] = {MARKER: "Written by `lmgrade build --student-bundle`.\n"}
    files.update(engine_files())
    files["pyproject.toml"] = engine_pyproject(
        "lmgrade", engine_dependencies(),
        "The course's grading engine for students: `pip install -e .` in this folder.\n"
        "Editable, so the engine finds assignments/ beside it.")
    for assignment in chosen:
        files.update(public_files(assignment))
    for split, path in shakespeare.prepare(None, include_test=False).items():
        files[f"{data_dir}/{split}.txt"] = path.read_bytes()
    files["README.md"] = _readme(chosen, data_dir)
    written = []
    for rel, content in sorted(files.items()):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        written.append(path)
    return written
