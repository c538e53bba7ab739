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
from tests.test_batch import FAST, solution, tiny  # noqa: F401
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


# ---- nothing a student's code chose: issue 30 (a raised text carried hidden inputs) ------------------
@pytest.mark.parametrize("message, expected", [
    ("tokenize(\"O'er the hills\") raised ValueError: O'er the hills--and far away!\nTraceback ...",
     "tokenize(<text>) raised ValueError"),
    ("tokenize(<text>) raised HillsAndFarAway: whatever", "tokenize(<text>) raised an exception"),
    ("tokenize('x') is not implemented yet (NotImplementedError: hills far away)",
     "tokenize(<text>) is not implemented yet (the starter's stub)"),
    ("`tokenize` was never defined: graded cell 3 raised KeyError: hills far before reaching it. Graded cells...",
     "`tokenize` was never defined: graded cell <n> raised KeyError"),
    ("<HillsFarAway>.prob('a', 3) returned a value the grader cannot read: hills far away",
     "<object>.prob(<text>, ...) returned a value the grader cannot read"),
    ("tokenize('x'): unreadable reply (unknown type hills_far_away)", "tokenize(<text>): unreadable reply"),
])
def test_groups_keep_the_graders_words_and_drop_what_student_code_chose(message, expected):
    assert normalise(message, frozenset({"tokenize"})) == expected


LEAKING = '''

class FarAwayHills(Exception):
    pass


def tokenize(line):
    if len(line) > 20:
        raise {error}(line)
    return line.split()
'''


def test_report_groups_by_the_graders_message_and_counts_starter_stubs_apart(tmp_path, tiny):
    """tokenize raises the hidden input it was given (as an attack did to read hidden `tokenize`
    inputs off report.html), once as a ValueError and once as an exception class of its own; two
    students hand in the untouched starter. The report keeps neither the raised text nor the class's
    name, groups the two ValueErrors as one mistake, and counts the stubs apart."""
    from autograder.grading import batch
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name, error in (("ann", "ValueError"), ("ben", "ValueError"), ("cyd", "FarAwayHills")):
        (subs / f"{name}.py").write_text(solution() + LEAKING.format(error=error))
    for name in ("dot", "eve"):
        (subs / f"{name}.ipynb").write_text(tiny.starter_path.read_text())
    batch.run([subs], tiny, out, jobs=2, limits=FAST, progress=False)
    hidden = "O'er the hills--and far away!"  # an input of the tiny course's hidden check
    assert hidden in (out / "feedback" / "ann.txt").read_text()  # the student's text is in the staff's feedback
    assert "FarAwayHills" in (out / "feedback" / "cyd.txt").read_text()
    text = (out / "report.html").read_text()
    for leaked in ("hills", "far away", "FarAwayHills", "O&#x27;er"):
        assert leaked not in text, leaked
    page = Page(text)
    failures = page.rows[next(i for i, row in enumerate(page.rows) if row[:3] == ["students", "check", "message"]) + 1:]
    failures = failures[:next((i for i, row in enumerate(failures) if row[0] == "students"), len(failures))]
    assert [row for row in failures if row[2] == "tokenize(<text>) raised ValueError" and row[3] == "ann, ben"]
    assert [row for row in failures if row[2] == "tokenize(<text>) raised an exception" and row[3] == "cyd"]
    assert not [row for row in failures if "not implemented" in row[2]]  # the stubs fill no row of the list
    assert "Not implemented yet" in page.headings
    stubs = {row[1]: row for row in page.rows_with("dot, eve")}
    assert stubs["tokenize"][0] == "2" and len(stubs) >= 3, stubs  # one row per function left as the stub
    assert not [row for row in failures if row[3] == "dot, eve"]
