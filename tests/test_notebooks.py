"""The notebooks students and staff open run in a real Jupyter kernel."""
import json
import shutil

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from autograder import assignments, build

FINISHED = [a.id for a in assignments.available() if a.finished]


def execute(path, timeout=600):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", FINISHED)
def test_staff_solution_runs_top_to_bottom(tmp_path, monkeypatch, assignment_id):
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend turns plots into PNGs
    build.write_solution_notebooks(tmp_path, [assignments.get(assignment_id)])
    nb = execute(tmp_path / f"{assignment_id}.ipynb")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any(o.output_type == "display_data" and "image/png" in o.get("data", {}) for o in outputs), "no plot"
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "public checks" in printed.lower(), "the in-notebook check line did not report"


@pytest.mark.parametrize("assignment_id", FINISHED)
def test_starter_stops_at_its_first_stub(tmp_path, monkeypatch, assignment_id):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = tmp_path / f"{assignment_id}.ipynb"
    shutil.copy(assignments.get(assignment_id).starter_path, path)
    with pytest.raises(CellExecutionError) as info:
        execute(path, timeout=120)
    assert "NotImplementedError" in str(info.value)
    nb = json.loads(path.read_text())  # the file on disk is untouched
    assert all(c.get("outputs", []) == [] for c in nb["cells"] if c["cell_type"] == "code")
