"""`lmgrade export`: the written answers as the PDF students upload, each question on its own page.

The PDF tests print in a real headless Chromium and read the pages back with pypdf; they skip
where no Chromium is installed. The staff solution, executed so that its figures exist, is
exported in tests/test_notebooks.py.
"""
import base64
import hashlib
import io
import re
import shutil
import subprocess
import sys
import unicodedata

import nbformat
import pytest

from autograder import cli
from autograder.authoring import assignments, build, source
from autograder.student import export

FINISHED = [a for a in assignments.available() if a.finished]
BROWSER = export._browser()
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no Chromium here (apt install chromium)")


def pdf_pages(path) -> list[tuple[str, int]]:
    """(text, number of images) of every page."""
    from pypdf import PdfReader
    return [(unicodedata.normalize("NFKC", page.extract_text() or ""), len(page.images))  # "ﬀ" ligatures
            for page in PdfReader(str(path)).pages]


def png() -> str:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def staff_answers(assignment) -> list[str]:
    """The staff answers' text: what must never reach a starter's PDF."""
    cells = source.parse(assignment.source_path.read_text())
    return [c.text for c in cells if c.kind == "markdown" and "answer" in c.tags and "solution" in c.tags]


def question_starts(pages) -> list[int]:
    """Indices of the pages that begin with a written question's heading."""
    return [i for i, (text, _) in enumerate(pages) if text.lstrip().startswith("Written question")]


@pytest.mark.parametrize("assignment", FINISHED, ids=lambda a: a.id)
def test_every_assignment_has_written_questions_with_answers_and_staff_answers(assignment):
    nb = nbformat.reads(assignment.starter_path.read_text(), as_version=4)
    found = export.questions(nb)
    assert 2 <= len(found) <= 4, [q.prompt.source[:60] for q in found]
    for q in found:
        assert q.prompt.source.startswith(f"### Written question {q.number}:")
        assert len(q.answers) == 1 and q.answers[0].source.startswith("*Your answer")
    assert len(staff_answers(assignment)) == len(found)
    solution = nbformat.reads(build.notebook(assignment, "solution"), as_version=4)
    assert [q.answers[0].source for q in export.questions(solution)] == staff_answers(assignment)


@needs_browser
@pytest.mark.parametrize("assignment", FINISHED, ids=lambda a: a.id)
def test_starter_pdf_has_a_page_per_question_and_no_solution_text(tmp_path, assignment):
    path = tmp_path / f"{assignment.id}.ipynb"
    path.write_text(assignment.starter_path.read_text())
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    written, how = export.export(path)
    assert written == tmp_path / f"{assignment.id}-written.pdf" and "printed by" in how
    pages = pdf_pages(written)
    starts = question_starts(pages)
    assert len(starts) == len(export.questions(nbformat.read(path, as_version=4)))
    assert starts[0] >= 1  # the cover is a page of its own
    text = " ".join(t for t, _ in pages)
    for answer in staff_answers(assignment):
        sentence = answer.split(".")[1].strip()[:40]  # a sentence of the staff answer, as printed text
        assert sentence not in text
    assert "BEGIN SOLUTION" not in text and "def " not in text  # no code at all
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before  # the notebook is only read


def student_notebook(assignment, tmp_path, answer="The loss falls because smoothing moves mass."):
    """The starter as a student leaves it: figure cells run (a plot each), answers typed, one answer
    in a cell the student added, and output of a cell that is no figure."""
    nb = nbformat.reads(assignment.starter_path.read_text(), as_version=4)
    image = png()
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "figure" in tags:
            cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": image, "text/plain": "<Figure>"}),
                            nbformat.v4.new_output("display_data", data={"text/html": "<script>alert(1)</script>"})]
        elif cell.cell_type == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="NOT A FIGURE OUTPUT\n")]
    found = export.questions(nb)
    found[0].answers[0].source = answer
    at = nb.cells.index(found[1].answers[0])
    extra = nbformat.v4.new_markdown_cell("A second paragraph in a cell I added.")
    nb.cells.insert(at + 1, extra)
    path = tmp_path / f"{assignment.id}.ipynb"
    nbformat.write(nb, path)
    return path, found


@pytest.mark.parametrize("assignment", FINISHED[:1], ids=lambda a: a.id)
def test_the_export_holds_answers_and_figure_outputs_only(tmp_path, assignment):
    path, _ = student_notebook(assignment, tmp_path)
    written = export.written_notebook(nbformat.read(path, as_version=4), assignment.id)
    html = export.html_of(written)
    assert "The loss falls because smoothing moves mass." in html
    assert "A second paragraph in a cell I added." in html
    assert "data:image/png;base64" in html
    assert "NOT A FIGURE OUTPUT" not in html and "alert(1)" not in html
    assert "def " not in html and "import matplotlib" not in html  # outputs, never the figure cells' code


@needs_browser
def test_figures_and_answers_land_on_their_question_pages(tmp_path):
    assignment = assignments.get("attention")
    path, found = student_notebook(assignment, tmp_path)
    written, _ = export.export(path, tmp_path / "out.pdf")
    pages = pdf_pages(written)
    starts = question_starts(pages) + [len(pages)]
    for q, (start, end) in zip(found, zip(starts, starts[1:])):
        section = pages[start:end]
        assert sum(images for _, images in section) >= len(q.figures) >= 1
    assert "The loss falls because smoothing moves mass." in " ".join(t for t, _ in pages[starts[0]:starts[1]])


def no_pdf_route(monkeypatch) -> None:
    monkeypatch.setattr(export, "_browser", lambda: None)
    monkeypatch.setattr(export.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "playwright", None)  # nbconvert's webpdf route: no Playwright


def test_without_any_pdf_route_it_writes_html_and_says_what_to_install(tmp_path, monkeypatch):
    path, _ = student_notebook(assignments.get("ngram"), tmp_path)
    no_pdf_route(monkeypatch)
    with pytest.raises(export.NoPdfRoute) as info:
        export.export(path)
    written = info.value.written
    assert written == tmp_path / "ngram-written.html" and written.is_file()
    assert not (tmp_path / "ngram-written.pdf").exists()
    said = str(info.value)
    assert "ngram-written.pdf was not written" in said and str(written) in said
    assert "install Chromium" in said and "print it to PDF" in said
    assert "break-before: page" in written.read_text()


def test_export_asked_for_a_pdf_it_cannot_make_exits_1_and_names_the_html(tmp_path, monkeypatch, capsys):
    """`--output answers.pdf` with no PDF route: exit 1, answers.pdf absent, the HTML named; a script
    that checks the status (or the file it asked for) never takes the HTML for the PDF."""
    path, _ = student_notebook(assignments.get("ngram"), tmp_path)
    no_pdf_route(monkeypatch)
    assert cli.main(["export", str(path), "--output", str(tmp_path / "answers.pdf")]) == 1
    out, err = capsys.readouterr()
    assert not (tmp_path / "answers.pdf").exists() and (tmp_path / "answers.html").is_file()
    assert out == "" and "answers.pdf was not written" in err and str(tmp_path / "answers.html") in err
    assert cli.main(["export", str(path), "--output", str(tmp_path / "mine.html")]) == 0  # HTML asked for: made
    assert (tmp_path / "mine.html").is_file() and "wrote" in capsys.readouterr().out


def test_the_install_hint_is_copyable_in_zsh_as_in_bash(tmp_path, monkeypatch):
    """Every command the message quotes runs as pasted, in a shell where an unmatched glob is an
    error: zsh's default (macOS's shell), and bash with failglob where zsh is not installed. The
    unquoted `pip install nbconvert[webpdf]` failed there with "no matches found"."""
    path, _ = student_notebook(assignments.get("ngram"), tmp_path)
    no_pdf_route(monkeypatch)
    with pytest.raises(export.NoPdfRoute) as info:
        export.export(path)
    commands = re.findall(r"`([^`]+)`", str(info.value))
    assert 'pip install "nbconvert[webpdf]"' in commands, commands
    assert 'pip install "nbconvert[webpdf]"' in (assignments.ROOT / "docs" / "students.md").read_text()
    fake = "pip() { printf '%s\\n' \"$@\"; }; playwright() { :; }; sudo() { :; }"
    shells = [[shutil.which("zsh"), "-c"]] if shutil.which("zsh") else []
    shells.append(["bash", "-O", "failglob", "-c"])
    for shell in shells:
        for command in commands:
            proc = subprocess.run([*shell, f"{fake}; {command}"], cwd=tmp_path, capture_output=True, text=True,
                                  timeout=30)
            assert proc.returncode == 0 and "no match" not in proc.stderr, (shell, command, proc.stderr)
        proc = subprocess.run([*shell, f"{fake}; pip install nbconvert[webpdf]"], cwd=tmp_path, capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode != 0  # the shell really refuses the unquoted form: the check can fail
    proc = subprocess.run(["bash", "-O", "failglob", "-c", f'{fake}; pip install "nbconvert[webpdf]"'],
                          capture_output=True, text=True, timeout=30)
    assert proc.stdout.split() == ["install", "nbconvert[webpdf]"]  # pip gets the extra as written


def test_a_notebook_without_written_questions_gets_a_clear_message(tmp_path, capsys):
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell("# just notes"))
    path = tmp_path / "mine.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["export", str(path)]) == 1
    assert "no written questions" in capsys.readouterr().err
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert cli.main(["export", str(tmp_path / "broken.ipynb")]) == 1
    assert "could not read broken.ipynb" in capsys.readouterr().err


def test_cli_export_html(tmp_path, capsys):
    path, _ = student_notebook(assignments.get("backprop"), tmp_path)
    assert cli.main(["export", str(path), "--html", "--output", str(tmp_path / "w.pdf")]) == 0
    assert (tmp_path / "w.html").is_file() and "wrote" in capsys.readouterr().out
