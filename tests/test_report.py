"""report.html, the class report a batch writes for TAs: a histogram, pass rates per question and
per check, the commonest failures grouped without hidden inputs or reference values, the
leaderboard, and a link to every student's feedback file; one file, no script, no network.

It is opened in a real headless browser (Chromium, or Chrome) where one is on PATH; elsewhere
(CI without a browser) that test skips. The batch is test_leaderboard's: one of its hidden checks
fails with a message that names a hidden input and plants a reference figure, and one student's
id is an HTML tag.
"""
import csv
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from autograder.grading.report import normalise
from tests.test_leaderboard import HIDDEN_INPUT, HOSTILE, REFERENCE_FIGURE, board, graded  # noqa: F401

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
PLANTED_GROUP = "perplexity <n> on <text> is far above the reference's <n>"


class Page(HTMLParser):
    """Elements, headings, table rows (as lists of cell texts) and text of an HTML document, as
    parsed from the file or from a browser's DOM."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.rows: list[list[str]] = []
        self.headings: list[str] = []
        self._in: str | None = None
        self._cell = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th") and self.rows:
            self.rows[-1].append("")
            self._cell = True
        elif tag in ("h1", "h2", "h3"):
            self._in = tag
            self.headings.append("")

    def handle_endtag(self, tag):
        if tag == self._in:
            self._in = None
        if tag in ("td", "th", "tr", "table"):
            self._cell = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in:
            self.headings[-1] += data
        elif self._cell:
            self.rows[-1][-1] += data

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    def rows_with(self, words: str) -> list[list[str]]:
        return [row for row in self.rows if any(words in cell for cell in row)]


@pytest.mark.parametrize("message, expected", [
    ("tokenize(\"O'er the hills\"): expected length 3, got 2", "tokenize(<text>): expected length <n>, got <n>"),
    ("mle(counts): 1 of 2 value(s) differ (rtol=1e-07). Worst at index 1: expected 2.5, got -2",
     "mle(counts): <n> of <n> value(s) differ (rtol=<n>). Worst at index <n>: expected <n>, got <n>"),
    ("`tokenize` (Q1) fails its own checks; fix it first.", "`tokenize` (Q1) fails its own checks; fix it first."),
    ("got ['the', 'cat', 'sat'] for `secret_word`, shape (3, 4) float32", "got [<text>, ...] for <text>, shape "
                                                                           "(<n>, ...) float32"),
    ("your model doesn't match\nsecond line: 42", "your model doesn't match"),
])
def test_messages_group_by_their_shape(message, expected):
    assert normalise(message, frozenset({"tokenize"})) == expected


def test_the_report_groups_mistakes_and_never_shows_hidden_values(graded):
    _, out, _ = graded
    assert REFERENCE_FIGURE in (out / "feedback" / "frank.txt").read_text()  # the plant reached the message
    text = (out / "report.html").read_text()
    for secret in (REFERENCE_FIGURE, "987654", *HIDDEN_INPUT.split()):
        assert secret not in text, secret
    page = Page(text)
    [row] = page.rows_with(PLANTED_GROUP)  # frank and the hostile id: one group of two
    assert row[0] == "2" and row[-1] == f"{HOSTILE}, frank", row
    assert page.count("script") == page.count("img") == 0
    assert HOSTILE in "".join(page.text)  # shown as text, escaped in the file
    assert "<img" not in text


def browser() -> str | None:
    return next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)


def test_the_report_renders_in_a_real_browser(graded):
    exe = browser()
    if exe is None:
        pytest.skip(f"no headless browser on PATH ({', '.join(BROWSERS)})")
    _, out, _ = graded
    report = out / "report.html"
    proc = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", report.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    page = Page(proc.stdout)
    assert page.count("svg") == 1 and page.count("rect") >= 5  # the histogram, one bar per bin
    assert {"Scores", "Questions", "Checks", "Commonest failures", "Leaderboard", "Students"} <= set(page.headings)
    assert page.count("table") >= 6  # questions, checks, failures, two metrics, students
    [bob] = [row for row in page.rows if row[1:] == ["bob", "9.25"]]  # the leaderboard's first place
    assert bob[0] == "1"
    assert page.count("script") == page.count("img") == page.count("iframe") == 0  # the hostile id stayed text
    assert HOSTILE in "".join(page.text) and page.rows_with(PLANTED_GROUP)
    assert not any("src" in attrs for _, attrs in page.tags)  # nothing fetched: no network, no file
    links = [attrs["href"] for tag, attrs in page.tags if tag == "a"]
    for href in links:
        parts = urlsplit(href)
        assert not parts.scheme and not parts.netloc and not href.startswith("/"), href
        assert (out / unquote(parts.path)).is_file(), href
    with open(out / "grades.csv", newline="") as f:
        students = [row["student_id"] for row in csv.DictReader(f)]
    assert len({unquote(h) for h in links}) == len(students)  # every student's feedback, each its own
    rendered = "".join(page.text)
    for secret in (REFERENCE_FIGURE, *HIDDEN_INPUT.split()):
        assert secret not in rendered and secret not in proc.stdout


def test_an_empty_class_still_gets_a_report(tmp_path):
    """No submission fully graded: the histogram says so instead of failing the batch's last files."""
    from autograder.grading.report import histogram_svg
    assert "no submission has every question graded" in histogram_svg([], 10)
    svg = histogram_svg([0.0, 0.0], 0)  # an assignment worth 0 points
    assert svg.count("<rect") == 5


def test_the_report_is_there_after_a_plain_batch(graded):
    _, out, result = graded
    assert not result.write_errors
    assert Path(out / "report.html").read_text().startswith("<!DOCTYPE html>")
