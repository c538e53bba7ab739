"""The notebooks students and staff open run in a real Jupyter kernel."""
import json
import shutil
import unicodedata

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from autograder.authoring import assignments, build
from autograder.student import export

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
    if export._browser() is None:
        return  # the PDF needs a Chromium (tests/test_export.py says so where it skips)
    executed = tmp_path / "executed.ipynb"
    nbformat.write(nb, executed)
    pdf, _ = export.export(executed)
    from pypdf import PdfReader
    pages = [(p.extract_text() or "", len(p.images)) for p in PdfReader(str(pdf)).pages]
    starts = [i for i, (text, _) in enumerate(pages) if text.lstrip().startswith("Written question")]
    found = export.questions(nb)
    assert len(starts) == len(found) >= 2
    for q, start, end in zip(found, starts, starts[1:] + [len(pages)]):  # each question's figures on its pages
        if any("image/png" in o.get("data", {}) for c in q.figures for o in c.outputs):
            assert sum(images for _, images in pages[start:end]) >= 1, f"no figure for written question {q.number}"
    printed_pdf = unicodedata.normalize("NFKC", " ".join(" ".join(text for text, _ in pages).split()))  # "ﬀ" ligatures
    assert printed_pdf.count("Staff answer") == len(found), printed_pdf[:300]


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
