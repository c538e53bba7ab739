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
import shutil
from pathlib import Path

from autograder import build
from autograder.assignments import ROOT, Assignment, available
from autograder.data import shakespeare

PACKAGE_DIR = Path(__file__).resolve().parent
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
    cfg = ROOT / "setup.cfg"
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
    """The assignment's files students get, as {path relative to the bundle: text}, freshly generated."""
    generated = build.generated_files(assignment)
    out = {f"assignments/{assignment.id}/{name}": (assignment.dir / name).read_text() for name in PUBLIC_FILES}
    out[f"assignments/{assignment.id}/public_fixtures.json"] = generated[assignment.fixtures_path]
    out[f"starter_notebooks/{assignment.id}.ipynb"] = generated[assignment.starter_path]
    return out


def _readme(chosen: list[Assignment], data_dir: str) -> str:
    rows = "".join(f"| `{a.id}` | {a.title} | `starter_notebooks/{a.id}.ipynb` |\n" for a in chosen)
    return f"""# Language-model homework: student bundle

| assignment | title | notebook |
| --- | --- | --- |
{rows}
## Install (once)

With Python 3.11 or newer, inside this folder (a virtual environment is a good idea):

```sh
pip install -e .
```

This installs the `autograder` package the notebooks use (with numpy, torch, Jupyter's notebook
tools and the Shakespeare text) and the `lmgrade` command. Keep the folder where it is: the
package reads the assignments from it.

## Work and check

Open the starter notebook, fill in the cells marked `# GRADED CELL`, **save**, and run the check
cell at the end, or from a shell:

```sh
lmgrade check starter_notebooks/<assignment>.ipynb
```

These are the public checks only; the hidden checks on Gradescope decide the score. Submit the
notebook (.ipynb) on Gradescope.

## Data

The notebooks read Shakespeare through `autograder.data.shakespeare` (`lines("train")`,
`lines("validation")`); it prepares the text on first use and caches it in `~/.cache/lmgrade`.
The same prepared splits are in `{data_dir}/` (train and validation only: the test plays stay with
the grader); to use these copies instead, set `LMGRADE_CACHE` to this folder's `data` directory
before starting Jupyter.
"""


def write(dest: Path, assignments: list[Assignment] | None = None) -> list[Path]:
    """Write the bundle into `dest` (empty, missing, or an earlier bundle); return the files written."""
    chosen = assignments if assignments is not None else [a for a in available() if a.finished]
    if not chosen:
        raise BundleError("no finished assignment to bundle")
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
