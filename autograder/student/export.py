"""`lmgrade export NOTEBOOK`: the written answers as the PDF students upload for manual grading.

Why a PDF of its own: Gradescope grades written work from a PDF in which course staff map each
question to its pages. So every written question starts a new page under a header with its
number, holds the figures and printed results it is about (the outputs of its `figure` cells,
never their code) and the student's answer, and nothing else: no code, no hidden material.
Nothing is run and the notebook is only read.

Routes, in order: nbconvert's HTML printed by a headless Chromium (the system's, or Playwright's
through nbconvert's `webpdf`), nbconvert's LaTeX PDF where `xelatex` is installed. Without any of
them the HTML is written and `NoPdfRoute` raised (`lmgrade export` exits 1): a PDF was asked for
and none was made. Cells are found by the tags the build gives them (`written`, `answer`,
`figure`; see autograder/authoring/source.py).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
BROWSER_ENV = "LMGRADE_CHROMIUM"  # a browser to use instead of the ones on PATH
QUESTION_CLASS = "celltag_lmgrade-question"  # nbconvert's lab template turns cell tags into classes
PAGE_CSS = f"""<style>
.{QUESTION_CLASS} {{ break-before: page; page-break-before: always; }}
.jp-InputPrompt, .jp-OutputPrompt {{ display: none; }}
img {{ max-width: 100%; }}
@page {{ margin: 18mm; }}
</style>"""
KEPT_OUTPUTS = ("image/png", "image/jpeg", "image/svg+xml", "text/plain")  # no HTML or scripts of the notebook's


class ExportError(RuntimeError):
    """The notebook cannot be exported (unreadable, no written questions)."""


class NoPdfRoute(ExportError):
    """A PDF was asked for and none could be made here; the HTML to print is at `written`.

    Why an error and not a quiet fallback: `lmgrade export --output answers.pdf` that exits 0 after
    writing answers.html reads as success to a script or a student who then uploads nothing (or an
    older answers.pdf). So the command exits 1, and the message names the HTML it wrote instead."""

    def __init__(self, message: str, written: Path):
        super().__init__(message)
        self.written = written


# what to install for a PDF, as commands a student can paste into bash or zsh (macOS's shell, where
# an unquoted `nbconvert[webpdf]` is a glob that fails with "no matches found")
INSTALL_HINT = ("install Chromium (`sudo apt install chromium`, or `pip install \"nbconvert[webpdf]\"` then "
                "`playwright install chromium`) and export again")


@dataclass
class Question:
    number: int
    prompt: nbformat.NotebookNode
    figures: list = field(default_factory=list)  # code cells whose outputs the question is about
    answers: list = field(default_factory=list)  # markdown cells: the student's answer


def _tags(cell) -> list[str]:
    tags = cell.get("metadata", {}).get("tags", [])
    return [t for t in tags if isinstance(t, str)] if isinstance(tags, list) else []


def questions(nb) -> list[Question]:
    """The written questions in notebook order, each with its figures and answer cells.

    An answer is every markdown cell after the question tagged `answer`, or added by the student
    (an id the build did not give), up to the next cell of the starter.
    """
    starter_id = re.compile(rf"^{re.escape(str(nb.metadata.get('lmgrade', {}).get('assignment', '')))}-\d{{3}}$")
    found: list[Question] = []
    figures: list = []
    current: Question | None = None
    for cell in nb.cells:
        tags = _tags(cell)
        if "written" in tags:
            current = Question(len(found) + 1, cell, figures)
            found.append(current)
            figures = []
            continue
        if current is not None and cell.cell_type == "markdown" and (
                "answer" in tags or not starter_id.match(str(cell.get("id", "")))):
            current.answers.append(cell)
            continue
        current = None
        if cell.cell_type == "code" and "figure" in tags:
            figures.append(cell)
    return found


def outline(assignment) -> str:
    """The outline course staff type into Gradescope's PDF assignment: one question per written question.

    Why from the starter: it is exactly what students export, in the same order.
    """
    nb = nbformat.reads(assignment.starter_path.read_text(), as_version=4)
    rows = "\n".join(f"{q.number}. {q.prompt.source.strip().splitlines()[0].lstrip('# ')}" for q in questions(nb))
    return (f"# Written questions of `{assignment.id}` ({assignment.title})\n\n"
            "Create a PDF assignment on Gradescope beside the autograder (programming) assignment; students "
            f"upload the PDF that `lmgrade export {assignment.id}.ipynb` (or `export_answers()` in the notebook) "
            "makes. Its first page is a cover that lists the questions; each question starts a new page "
            "headed by its number and title, with its figures and the student's answer. Outline, one "
            "question each (set the points as you grade):\n\n" + rows + "\n")


def _kept(output) -> nbformat.NotebookNode | None:
    """A figure cell's output as the PDF shows it: images, text and printed lines only."""
    if output.get("output_type") == "stream":
        return output
    if output.get("output_type") in ("display_data", "execute_result"):
        data = {k: v for k, v in output.get("data", {}).items() if k in KEPT_OUTPUTS}
        if data:
            return nbformat.v4.new_output("display_data", data=data)
    return None


def written_notebook(nb, title: str) -> nbformat.NotebookNode:
    """A new notebook of the written questions only: a cover, then a page per question."""
    found = questions(nb)
    if not found:
        raise ExportError("this notebook has no written questions (markdown cells tagged `written`): export the "
                          "notebook you downloaded, and keep the tags of its cells when you copy them.")
    out = nbformat.v4.new_notebook()
    out.metadata = {"lmgrade": dict(nb.metadata.get("lmgrade", {}))}
    listed = "\n".join(f"- Written question {q.number}" for q in found)
    out.cells.append(nbformat.v4.new_markdown_cell(
        f"{PAGE_CSS}\n\n# {title}: written answers\n\nEach question starts a new page.\n\n{listed}"))
    for q in found:
        out.cells.append(nbformat.v4.new_raw_cell("\\newpage", metadata={"raw_mimetype": "text/latex"}))
        first, _, rest = q.prompt.source.strip().partition("\n")
        if not first.startswith("#"):  # the prompt has no heading of its own: number it here
            first, rest = f"Written question {q.number}", q.prompt.source
        out.cells.append(nbformat.v4.new_markdown_cell(f"## {first.lstrip('# ')}", metadata={"tags": ["lmgrade-question"]}))
        if rest.strip():
            out.cells.append(nbformat.v4.new_markdown_cell(rest.strip()))
        for figure in q.figures:
            outputs = [o for o in (_kept(o) for o in figure.get("outputs", [])) if o is not None]
            if outputs:
                cell = nbformat.v4.new_code_cell("", outputs=outputs)
                out.cells.append(cell)
        answer = "\n\n".join(c.source for c in q.answers).strip()
        out.cells.append(nbformat.v4.new_markdown_cell(answer or "*(no answer)*"))
    return out


def _browser() -> str | None:
    """A Chromium to print with: $LMGRADE_CHROMIUM, one on PATH, or Playwright's own download."""
    chosen = os.environ.get(BROWSER_ENV)
    if chosen:
        return chosen
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    cache = Path(os.environ.get("PLAYWRIGHT_BROWSERS_PATH", Path.home() / ".cache" / "ms-playwright"))
    for candidate in sorted(cache.glob("chromium-*/chrome-linux*/chrome"), reverse=True):
        return str(candidate)
    return None


def html_of(nb) -> str:
    from nbconvert import HTMLExporter
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    body, _ = exporter.from_notebook_node(nb)
    return body


def print_pdf(html: str, dest: Path, browser: str, timeout: float = 180) -> None:
    """Chromium's own headless print of nbconvert's HTML (page breaks from PAGE_CSS)."""
    with tempfile.TemporaryDirectory(prefix="lmgrade-export-") as tmp:
        page = Path(tmp) / "written.html"
        page.write_text(html, encoding="utf-8")
        flags = ["--headless", "--disable-gpu", "--no-pdf-header-footer", f"--user-data-dir={tmp}/profile"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            flags.append("--no-sandbox")  # Chromium refuses to start its sandbox as root
        proc = subprocess.run([browser, *flags, f"--print-to-pdf={dest}", page.as_uri()], capture_output=True,
                              text=True, timeout=timeout)
        if proc.returncode != 0 or not dest.is_file() or dest.stat().st_size == 0:
            raise ExportError(f"{browser} could not print the PDF: {proc.stderr.strip()[-300:]}")


def export(notebook: Path, dest: Path | None = None, *, html_only: bool = False) -> tuple[Path, str]:
    """Write the PDF (or HTML) of the written answers; returns (the file, what was done)."""
    notebook = Path(notebook)
    try:
        nb = nbformat.read(notebook, as_version=4)
    except Exception as exc:  # noqa: BLE001 - any unreadable notebook: one clear message
        raise ExportError(f"could not read {notebook.name} ({type(exc).__name__}); save it in Jupyter and try again") from None
    assignment = str(nb.metadata.get("lmgrade", {}).get("assignment") or notebook.stem)
    written = written_notebook(nb, f"`{assignment}`")
    pdf = Path(dest) if dest else notebook.with_name(f"{notebook.stem}-written.pdf")
    html_path = pdf.with_suffix(".html")
    html = html_of(written).replace("</head>", f"{PAGE_CSS}</head>", 1)
    if html_only or pdf.suffix.lower() in (".html", ".htm"):  # `--output answers.html` asks for HTML too
        html_path.write_text(html, encoding="utf-8")
        return html_path, "wrote the HTML (asked for with --html)"
    browser = _browser()
    if browser:
        print_pdf(html, pdf, browser)
        return pdf, f"printed by {Path(browser).name}"
    try:
        from nbconvert import WebPDFExporter
        import playwright  # noqa: F401 - nbconvert's webpdf route needs it, and its Chromium
        data, _ = WebPDFExporter(exclude_input=True).from_notebook_node(written)
        pdf.write_bytes(data)
        return pdf, "printed by nbconvert's webpdf (Playwright's Chromium)"
    except Exception:  # noqa: BLE001 - no Playwright or no browser of its own: next route
        pass
    if shutil.which("xelatex"):
        from nbconvert import PDFExporter
        data, _ = PDFExporter(exclude_input=True).from_notebook_node(written)
        pdf.write_bytes(data)
        return pdf, "typeset by nbconvert's LaTeX route (xelatex)"
    html_path.write_text(html, encoding="utf-8")
    raise NoPdfRoute(f"no PDF could be made here, so {pdf.name} was not written; the answers are in {html_path} "
                     "instead: open it in a browser and print it to PDF (each question starts a page), or "
                     f"{INSTALL_HINT}.", html_path)
