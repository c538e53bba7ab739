"""Hostile submissions: none gains a point, each gets a clear message, the other questions are
still graded. (That a batch goes on after each of them: tests/test_batch.py.)

Submissions are tiny: a correct Q1 (tokenize, build_vocab, replace_oov) and Q4 (sentence_logprob,
perplexity), written here, with one function replaced by a hostile one. Only Q1 and Q4 are
graded (9 points, well under a second for correct code), so every expected score is exact.
"""
import json
import shutil
import os
import signal
import socket
import tempfile
import textwrap
import threading
import time
from functools import partial
from pathlib import Path

import nbformat
import pytest

from autograder import cli
from autograder.authoring import assignments
from autograder.checking.remote import Student, StudentCrash
from autograder.grading import redaction, runner
from autograder.sandbox.landlock import landlock_abi
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import USER_ENV, Limits, worker_identity

pytestmark = pytest.mark.usefixtures("policy_off")  # these attacks test the layers beneath the policy

NGRAM = assignments.get("ngram")
FAST = Limits(call_timeout=2, load_timeout=4)
QUESTIONS = {"1", "4"}
FULL = 9.0  # Q1 4 points + Q4 5 points
TOKENIZE_POINTS = 2.0  # public_tokenize + tokenize_hidden
PERPLEXITY_POINTS = 3.0  # public_chain_rule (also calls perplexity), perplexity_hidden, perplexity_stable

CORRECT = {
    "tokenize": '''
import re

def tokenize(line):
    words = re.findall(r"[a-z]+(?:'[a-z]+)*|[^\\sa-z]", line.lower())
    return list(words)
''',
    "build_vocab": '''
def build_vocab(sentences, min_count=2):
    seen = {}
    for sentence in sentences:
        for token in sentence:
            seen[token] = seen.get(token, 0) + 1
    return ({t for t, c in seen.items() if c >= min_count} | {"</s>", "<unk>"}) - {"<s>"}
''',
    "replace_oov": '''
def replace_oov(tokens, vocab):
    return [t if t in vocab else "<unk>" for t in tokens]
''',
    "sentence_logprob": '''
def sentence_logprob(lm, tokens):
    context = ["<s>"] * (lm.n - 1)
    total = 0.0
    for word in list(tokens) + ["</s>"]:
        total += lm.logprob(word, tuple(context))
        context.append(word)
    return total
''',
    "perplexity": '''
import math

def perplexity(lm, sentences):
    logp = sum(sentence_logprob(lm, s) for s in sentences)
    count = sum(len(s) + 1 for s in sentences)
    return math.inf if logp == -math.inf else math.exp(-logp / count)
''',
}


def write_submission(tmp_path: Path, name: str = "submission.py", **hostile: str) -> Path:
    """The correct submission with some functions replaced; a .py file of graded code."""
    parts = {**CORRECT, **{k: textwrap.dedent(v) for k, v in hostile.items()}}
    path = tmp_path / name
    path.write_text("\n".join(parts.values()))
    return path


def grade(path: Path, limits: Limits = FAST, questions=QUESTIONS):
    report = runner.grade(path, NGRAM, questions=set(questions), limits=limits)
    return report, {r.name: r for r in report.results}


def failed_outputs(results: dict) -> str:
    return "\n".join(r.output for r in results.values() if not r.passed)


def test_the_correct_submission_gets_full_marks(tmp_path):
    report, _ = grade(write_submission(tmp_path))
    assert report.score == FULL, [(r.name, r.output) for r in report.results if not r.passed]


# ---- exits, signals, loops, memory, output: only the hostile function loses its points ---------
ENDINGS = {
    "sys_exit": ("import sys\n    sys.exit(0)", ["raised SystemExit"]),
    "os_exit": ("import os\n    os._exit(0)", ["ended the student's process", "exited with code 0"]),
    "base_exception": ("raise BaseException('no grading today')", ["raised BaseException", "no grading today"]),
    "keyboard_interrupt": ("raise KeyboardInterrupt", ["raised KeyboardInterrupt"]),
    "kill_own_process": ("import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)", ["ended the student's process", "killed"]),
    "kill_own_group": ("import os, signal\n    os.killpg(0, signal.SIGKILL)", ["ended the student's process", "killed"]),
    "infinite_loop": ("while True:\n        pass", ["did not finish within 2 s", "infinite loop"]),
    "memory_bomb": ("return len(bytearray(20 * 10**9))", ["MemoryError", "GiB"]),
    "memory_growth": ("import numpy as np\n    keep = []\n    while True:\n        keep.append(np.ones(50_000_000))",
                      ["MemoryError"]),
}


@pytest.mark.parametrize("case", sorted(ENDINGS))
def test_process_ending_and_resource_hungry_code_costs_only_its_checks(tmp_path, case):
    body, words = ENDINGS[case]
    path = write_submission(tmp_path, tokenize=f"def tokenize(line):\n    {body}\n")
    limits = Limits(call_timeout=5, load_timeout=4, memory_bytes=1 << 30) if case == "memory_growth" else FAST
    report, results = grade(path, limits=limits)
    assert report.score == FULL - TOKENIZE_POINTS
    for name in ("public_tokenize", "tokenize_hidden"):
        assert not results[name].passed
        for word in words:
            assert word in results[name].output, (name, word, results[name].output)
        assert "not your fault" not in results[name].output and "worker.py" not in results[name].output


def test_printing_50_mb_is_clipped(tmp_path):
    path = write_submission(tmp_path, tokenize="""
        CALLS = []

        def tokenize(line):
            if len(CALLS) < 2:  # 50 MB on each of the first calls (one per check), not on all 300 of them
                print("x" * 50_000_000)
            CALLS.append(line)
            return line.split()  # wrong: keeps case and punctuation
        """)
    report, results = grade(path, limits=Limits(call_timeout=10, load_timeout=4))
    assert report.score == FULL - TOKENIZE_POINTS
    output = results["public_tokenize"].output
    assert "Your code printed:\nxxxx" in output and len(output) < 5000, output[-300:]
    assert len(json.dumps([r.output for r in report.results])) < 40_000


def test_fork_bomb_that_leaves_the_session_is_killed_completely(tmp_path):
    """A bounded fork bomb (128 processes, then a third call setsid() and a third double-fork and
    setsid(): neither the process group nor the session finds those). As root RLIMIT_NPROC does not
    apply, so the grader itself must find and kill every one of them."""
    tag = f"lmgb{os.getpid() % 100000:05d}"
    bomb = f"""
        def tokenize(line):
            import ctypes, os, time
            first = os.getpid()
            for _ in range(7):
                os.fork()  # 2 ** 7 = 128 processes, every one goes on below
            if os.getpid() != first:
                if os.getpid() % 3 == 0:
                    os.setsid()
                elif os.getpid() % 3 == 1:
                    if os.fork() > 0:
                        os._exit(0)  # the child is orphaned ...
                    os.setsid()  # ... and leaves the session too
                ctypes.CDLL(None).prctl(15, b"{tag}", 0, 0, 0)  # PR_SET_NAME: the test finds them by it
            while True:
                time.sleep(0.05)
        """

    def bombs() -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "comm").read_text().strip() == tag:
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state not in ("Z", "X"):
                        found.append(int(entry.name))
            except OSError:
                pass
        return found

    peak = [0]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], len(bombs()))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        box = Sandbox([{"index": 0, "number": 1, "source": textwrap.dedent(bomb) + CORRECT["build_vocab"]}],
                      limits=Limits(call_timeout=3, load_timeout=4, wall_factor=1, wall_extra=2))  # it sleeps: the backstop stops it
        with box:
            student = Student(box, timeout=3)
            with pytest.raises(StudentCrash, match="did not finish"):
                student.tokenize("x")
            left = bombs()
            assert left == [], f"{len(left)} bomb processes survived the kill"
            assert student.build_vocab([["a", "a"]], 2) == {"a", "</s>", "<unk>"}  # a fresh worker
        stop.set()
        watcher.join()
        assert peak[0] >= 60, f"the bomb never ran (peak {peak[0]} processes)"
        report, results = grade(write_submission(tmp_path, tokenize=textwrap.dedent(bomb)), limits=Limits(call_timeout=2, load_timeout=4, wall_factor=1, wall_extra=2))
        assert report.score == FULL - TOKENIZE_POINTS
        assert "did not finish" in results["tokenize_hidden"].output
        assert bombs() == []
    finally:
        stop.set()
        watcher.join()
        for pid in bombs():  # whatever happened above, leave nothing behind
            os.kill(pid, signal.SIGKILL)


# ---- values that lie ----------------------------------------------------------------------------
LIARS = {
    "list_with_lying_eq": ("tokenize", """
        class Yes(list):
            def __eq__(self, other):
                return True
            __hash__ = None

        def tokenize(line):
            return Yes(["wrong"])
        """),
    "object_with_lying_eq": ("tokenize", """
        class Anything:
            def __eq__(self, other):
                return True
            def __len__(self):
                return 7
            def __iter__(self):
                return iter([])

        def tokenize(line):
            return Anything()
        """),
    "str_subclass": ("tokenize", """
        class Token(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__

        def tokenize(line):
            return [Token("wrong")] * len(line.split())
        """),
    "nan": ("perplexity", "def perplexity(lm, sentences):\n    return float('nan')\n"),
    "inf": ("perplexity", "def perplexity(lm, sentences):\n    return float('inf')\n"),
    "ndarray_subclass": ("perplexity", """
        import numpy as np

        class Close(np.ndarray):
            def __eq__(self, other):
                return np.ones(np.shape(self), dtype=bool)
            def __sub__(self, other):
                return np.zeros(np.shape(self))
            __rsub__ = __sub__

        def perplexity(lm, sentences):
            return np.array(123.0).view(Close)
        """),
    "tensor_subclass_and_patched_torch": ("perplexity", """
        import torch, torch.testing
        import numpy as np
        torch.allclose = lambda *a, **k: True
        torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
        torch.equal = lambda *a, **k: True
        torch.testing.assert_close = lambda *a, **k: None
        np.allclose = lambda *a, **k: True
        np.testing.assert_allclose = lambda *a, **k: None

        class Agreeable(torch.Tensor):
            def __eq__(self, other):
                return torch.ones_like(self, dtype=torch.bool)
            def __float__(self):
                return 61.0

        def perplexity(lm, sentences):
            return torch.tensor(123.0, dtype=torch.float64).as_subclass(Agreeable)
        """),
}


@pytest.mark.parametrize("case", sorted(LIARS))
def test_lying_values_and_patched_comparisons_earn_nothing(tmp_path, case):
    target, source = LIARS[case]
    report, results = grade(write_submission(tmp_path, **{target: source}), limits=Limits(call_timeout=20, load_timeout=20))
    lost = TOKENIZE_POINTS if target == "tokenize" else PERPLEXITY_POINTS
    assert report.score == FULL - lost, [(r.name, r.output) for r in report.results if not r.passed]
    assert "not your fault" not in failed_outputs(results)


PATCH_ENGINE = """
    import numpy as np
    import autograder.checking.compare, autograder.checking.checks, autograder.errors, autograder.sandbox.worker
    autograder.checking.compare.assert_equal = lambda *a, **k: None
    autograder.checking.compare.assert_close = lambda *a, **k: None
    autograder.errors.CheckFailed = type("Nothing", (Exception,), {})
    autograder.checking.checks.check = lambda *a, **k: (lambda fn: fn)
    autograder.sandbox.worker.describe = lambda exc: {"type": "Passed", "message": "all good", "traceback": ""}
    np.array_equal = lambda *a, **k: True
    """
PATCH_WIRE = """
    import autograder.sandbox.wire
    _encode = autograder.sandbox.wire.encode
    autograder.sandbox.wire.encode = lambda value, *a, **k: _encode(["why", ",", "'", "tis"], *a, **k)
    """


@pytest.mark.parametrize("patch, expected", [(PATCH_ENGINE, FULL - TOKENIZE_POINTS), (PATCH_WIRE, 0.0)])
def test_patching_the_graders_own_modules_changes_nothing(tmp_path, patch, expected):
    """The worker has its own copy of the engine: patching it (or numpy) patches only that copy.
    Patching its encoder makes every reply the same made-up value: everything fails."""
    path = write_submission(tmp_path, tokenize=textwrap.dedent(patch) + "\ndef tokenize(line):\n    return line.split()\n")
    from autograder.checking import compare
    from autograder import errors
    before = (compare.assert_equal, compare.assert_close, errors.CheckFailed)
    report, results = grade(path)
    assert report.score == expected, [(r.name, r.output) for r in report.results]
    assert "tokenize(" in results["public_tokenize"].output
    assert (compare.assert_equal, compare.assert_close, errors.CheckFailed) == before


# ---- files and the network ----------------------------------------------------------------------
SECRET_FILES = [NGRAM.dir / "hidden_checks.py", NGRAM.reference_path]


def reader_source() -> str:
    paths = [str(p) for p in SECRET_FILES]
    return f"""
        def tokenize(line):
            shown = []
            for path in {paths!r}:
                try:
                    with open(path) as f:
                        text = f.read()
                except OSError as exc:
                    print("could not read", path, exc)
                    continue
                print(text[:1500])
                shown.append(text[:1500])
            raise ValueError("".join(shown)[:1900] or "nothing")
        """


def secret_text_in(text: str) -> list[str]:
    return [line for line in redaction.secret_lines(NGRAM) if line in text]


def test_reading_hidden_checks_is_denied_by_landlock(tmp_path):
    if landlock_abi() < 1:
        pytest.skip("this kernel has no Landlock: see the README for what protects the files then")
    report, results = grade(write_submission(tmp_path, tokenize=reader_source()))
    assert report.score == FULL - TOKENIZE_POINTS
    output = results["public_tokenize"].output
    assert "Permission denied" in output and "hidden_checks.py" in output
    assert secret_text_in(failed_outputs(results)) == []


def test_where_hidden_checks_can_be_read_feedback_is_scrubbed(tmp_path):
    """Without Landlock or a separate user the worker can read the grader's files (same uid): the
    score cannot change, and what it prints or raises is replaced before anyone reads feedback."""
    path = write_submission(tmp_path, tokenize=reader_source())
    report, results = grade(path, limits=Limits(call_timeout=2, load_timeout=4, confine=False))
    assert report.score == FULL - TOKENIZE_POINTS
    assert secret_text_in(failed_outputs(results)), "the files could not be read: this test shows nothing"
    redaction.redact_report(report, redaction.secret_lines(NGRAM), path)
    cleaned = "\n".join(r.output for r in report.results)
    assert secret_text_in(cleaned) == [] and redaction.REDACTED in cleaned
    assert "tokenize(" in results["public_tokenize"].output  # the rest of the message is intact


def test_redaction_spares_the_students_own_lines(tmp_path):
    reference_line = 'return re.findall(r"[a-z]+(?:\'[a-z]+)*|[^\\sa-z]", line.lower())'
    assert reference_line in redaction.secret_lines(NGRAM) or not any(reference_line in s for s in redaction.secret_lines(NGRAM))
    path = write_submission(tmp_path, tokenize=f"import re\ndef tokenize(line):\n    {reference_line}\n")
    report = runner.Report("ngram", str(path), "cpu", results=[runner.CheckResult(
        "c", "1", "t", 0, 1, False, f"Traceback:\n    {reference_line}\n", True)])
    redaction.redact_report(report, redaction.secret_lines(NGRAM), path)
    assert reference_line in report.results[0].output


@pytest.mark.parametrize("mode", ["landlock", "network_namespace", "unconfined"])
def test_network_connections(tmp_path, mode):
    """The test listens on a loopback port; the submission tries to fetch its answers from there."""
    if mode == "landlock" and landlock_abi() < 4:
        pytest.skip("Landlock without TCP rules on this kernel (needs Linux 6.7)")
    if mode == "network_namespace" and os.geteuid() != 0:
        pytest.skip("a network namespace needs root (as on Gradescope)")
    limits = {"landlock": Limits(call_timeout=5, load_timeout=5, isolate_network=False),
              "network_namespace": Limits(call_timeout=5, load_timeout=5, confine=False),
              "unconfined": Limits(call_timeout=5, load_timeout=5, confine=False, isolate_network=False)}[mode]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port, accepted, stop = server.getsockname()[1], [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            accepted.append(conn.recv(100))
            conn.sendall(b"why , ' tis the king's !")  # all the server can offer: it knows no hidden input
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        path = write_submission(tmp_path, tokenize=f"""
            import socket
            def tokenize(line):
                with socket.create_connection(("127.0.0.1", {port}), timeout=3) as s:
                    s.sendall(line.encode()[:90] or b"?")
                    return s.recv(1000).decode().split()
            """)
        report, results = grade(path, limits=limits)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert report.score == FULL - TOKENIZE_POINTS
    output = results["tokenize_hidden"].output
    if mode == "unconfined":  # possible, and still worthless: the grader serves nothing
        assert accepted and "tokenize(" in output
    else:
        assert accepted == []
        assert ("Permission denied" if mode == "landlock" else "Network is unreachable") in output


def test_landlock_confines_files_and_signals(tmp_path):
    """Without root: no grader files, no other student's scratch, no writes outside its own, no
    signals to the grader; its own directory, the Python installation and numpy still work."""
    abi = landlock_abi()
    if abi < 1:
        pytest.skip("this kernel has no Landlock")
    other = Path(tempfile.mkdtemp(prefix="lmgrade-scratch-"))  # what another worker's scratch looks like
    (other / "answers.txt").write_text("another student's work")
    outside = tmp_path / "outside.txt"
    probe = f"""
import os, numpy

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__

def probe():
    return {{"solution": attempt(lambda: open({str(NGRAM.reference_path)!r}).read()),
             "assignments": attempt(lambda: os.listdir({str(NGRAM.dir)!r})),
             "other_scratch": attempt(lambda: open({str(other / "answers.txt")!r}).read()),
             "write_outside": attempt(lambda: open({str(outside)!r}, "w").write("x")),
             "write_own": attempt(lambda: open("mine.txt", "w").write("x")),
             "numpy": attempt(lambda: numpy.linalg.inv(numpy.eye(3))),
             "signal_grader": attempt(lambda: os.kill({os.getpid()}, 0))}}
"""
    try:
        with Sandbox([{"index": 0, "number": 1, "source": probe}], limits=FAST) as box:
            seen = Student(box, timeout=5).probe()
    finally:
        shutil.rmtree(other, ignore_errors=True)
    assert seen["write_own"] == seen["numpy"] == "ok", seen
    for key in ("solution", "assignments", "other_scratch", "write_outside"):
        assert seen[key] == "PermissionError", (key, seen)
    assert not outside.exists()
    if abi >= 6:
        # ProcessLookupError: in a PID namespace of its own the worker cannot even name the grader
        assert seen["signal_grader"] in ("PermissionError", "ProcessLookupError"), seen


# ---- the results file -----------------------------------------------------------------------------
@pytest.mark.parametrize("confined", [True, False])
def test_writing_or_deleting_the_results_file_changes_nothing(tmp_path, monkeypatch, capsys, confined):
    out = tmp_path / "results" / "results.json"
    forged = json.dumps({"score": 100, "tests": [], "output": "forged"})
    path = write_submission(tmp_path, tokenize=f"""
        import os
        RESULTS = {str(out)!r}
        def forge():
            try:
                os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
                if os.path.exists(RESULTS):
                    os.remove(RESULTS)
                with open(RESULTS, "w") as f:
                    f.write({forged!r})
                print("forged", RESULTS)
            except OSError as exc:
                print("could not forge:", exc)
        forge()

        def tokenize(line):
            forge()
            return line.split()
        """)
    if not confined:
        monkeypatch.setattr(runner, "Limits", partial(Limits, confine=False))
    code = cli.main(["grade", str(path), "--assignment", "ngram", "--device", "cpu", "--question", "1", "--json", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["score"] == 4 - TOKENIZE_POINTS and "forged" not in doc["output"]
    assert len(doc["tests"]) == 4
    printed = json.dumps(doc)
    if confined and landlock_abi() >= 1:
        assert "could not forge" in printed and "Permission denied" in printed
    elif not confined and os.geteuid() == 0:  # as root a worker has a uid of its own: root's folder is closed
        assert "could not forge" in printed and "Permission denied" in printed
    elif not confined:
        assert "forged " in printed  # it did write, and the grader wrote last


# ---- notebooks -------------------------------------------------------------------------------------
def notebook(tmp_path, cells: list, name="hw.ipynb") -> Path:
    nb = nbformat.v4.new_notebook()
    for cell in cells:
        nb.cells.append(cell)
    path = tmp_path / name
    nbformat.write(nb, str(path))
    return path


def graded(source: str):
    cell = nbformat.v4.new_code_cell("# GRADED CELL\n" + textwrap.dedent(source))
    cell.metadata["tags"] = ["graded"]
    return cell


def test_notebook_with_huge_outputs_grades_quickly(tmp_path):
    cells = [graded(src) for src in CORRECT.values()]
    big = nbformat.v4.new_code_cell("print('x' * 10**6)")
    big.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 20_000_000),
                   nbformat.v4.new_output("display_data", data={"image/png": "A" * 20_000_000})]
    path = notebook(tmp_path, [big] + cells)
    assert path.stat().st_size > 40_000_000
    started = time.monotonic()
    report, _ = grade(path)
    assert report.score == FULL and time.monotonic() - started < 30


@pytest.mark.parametrize("change", ["missing", "renamed", "duplicated", "magics", "non_utf8"])
def test_mangled_notebooks(tmp_path, change):
    sources = dict(CORRECT)
    expect, words = FULL, []
    if change == "missing":
        del sources["tokenize"]
        expect, words = FULL - TOKENIZE_POINTS, ["does not define `tokenize`"]
    elif change == "renamed":
        sources["tokenize"] = CORRECT["tokenize"].replace("def tokenize(", "def tokenise(")
        expect, words = FULL - TOKENIZE_POINTS, ["does not define `tokenize`", "spelling"]
    elif change == "duplicated":  # an old broken copy first, the fixed one later: the later one is graded
        sources = {"old": "def tokenize(line):\n    return []\n", **sources}
    elif change == "magics":
        sources["tokenize"] = "%matplotlib inline\n!pip install nothing\n" + CORRECT["tokenize"] + "tokenize?\n"
    cells = [graded(src) for src in sources.values()]
    path = notebook(tmp_path, cells)
    if change == "non_utf8":  # latin-1 bytes in a comment of a graded cell
        raw = path.read_bytes().replace(b"# GRADED CELL", b"# GRADED CELL caf\xe9", 1)
        path.write_bytes(raw)
    report, results = grade(path)
    assert report.score == expect, [(r.name, r.output) for r in report.results if not r.passed]
    for word in words:
        assert word in results["public_tokenize"].output
    notes = " ".join(report.notes)
    if change == "duplicated":
        assert "defined in graded cells 1 and 2" in notes
    if change == "magics":
        assert "IPython syntax" in notes
    if change == "non_utf8":
        assert "not valid UTF-8" in notes


# ---- a separate user (Gradescope runs the grader as root) ----------------------------------------
def test_worker_user_is_ignored_unless_root(monkeypatch):
    monkeypatch.setenv(USER_ENV, "nobody")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert worker_identity() is None  # a TA's own account: nothing to switch to, no error
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # as root: a wrong setting is an error, never ignored
    with pytest.raises(ValueError, match="no such user"):
        worker_identity("no-such-user-lmgrade")
    with pytest.raises(ValueError, match="unprivileged"):
        worker_identity("root")


@pytest.mark.parametrize("confine", [False, True])
def test_worker_runs_as_another_user_when_root(nobody_python, tmp_path, monkeypatch, confine):
    """LMGRADE_WORKER_USER=nobody: the worker cannot read a root-only folder or write a root's
    folder (the user alone does it: confine=False; with Landlock on top as by default), while its
    own scratch dir works and grading is unchanged."""
    import pwd
    nobody = pwd.getpwnam("nobody")
    private = Path(tempfile.mkdtemp(prefix="lmgrade-private-"))  # 0700: like Gradescope's /autograder/source
    shared = Path(tempfile.mkdtemp(prefix="lmgrade-shared-"))  # root's, readable by all: like the results folder
    try:
        os.chmod(private, 0o700)
        os.chmod(shared, 0o755)
        (private / "secret.txt").write_text("root only")
        probe = f"""
import os

def attempt(fn):
    try:
        return repr(fn())
    except OSError as exc:
        return type(exc).__name__

def probe():
    return {{"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
             "read_private": attempt(lambda: open({str(private / "secret.txt")!r}).read()),
             "list_private": attempt(lambda: os.listdir({str(private)!r})),
             "write_shared": attempt(lambda: open({str(shared / "results.json")!r}, "w").write("{{}}")),
             "write_scratch": attempt(lambda: open("mine.txt", "w").write("ok")),
             "kill_grader": attempt(lambda: os.kill({os.getpid()}, 0))}}
"""
        monkeypatch.setenv(USER_ENV, "nobody")
        limits = Limits(call_timeout=10, load_timeout=20, worker_python=nobody_python, confine=confine,
                        isolate_network=confine)
        with Sandbox([{"index": 0, "number": 1, "source": probe}], limits=limits) as box:
            assert box.scratch.stat().st_uid == nobody.pw_uid
            seen = Student(box, timeout=10).probe()
        assert seen["uid"] == seen["euid"] == nobody.pw_uid and seen["gid"] == nobody.pw_gid
        assert seen["groups"] in ([], [nobody.pw_gid])
        assert seen["read_private"] == seen["list_private"] == seen["write_shared"] == "PermissionError", seen
        assert seen["write_scratch"] == "2" and seen["kill_grader"] in ("PermissionError", "ProcessLookupError")
        assert not (shared / "results.json").exists()

        # a root-only copy of the assignment (as on Gradescope): graded as usual, unreadable to the worker
        root = private / "course"
        shutil.copytree(NGRAM.dir, root / "assignments" / "ngram")
        (root / "solutions").mkdir()
        shutil.copy(NGRAM.reference_path, root / "solutions" / "ngram.py")
        hidden = root / "assignments" / "ngram" / "hidden_checks.py"
        path = write_submission(tmp_path, tokenize=f"""
            import re
            TRIED = []

            def tokenize(line):
                if not TRIED:
                    try:
                        print(open({str(hidden)!r}).read()[:2000])
                    except OSError as exc:
                        print("could not read:", exc)
                    TRIED.append(1)
                return re.findall(r"[a-z]+(?:'[a-z]+)*|[^\\sa-z]", line.lower())
            """)
        copy = assignments.Assignment("ngram", root)
        report = runner.grade(path, copy, questions={"1"}, limits=limits)
        results = {r.name: r for r in report.results}
        assert report.score == 4, [(r.name, r.output) for r in report.results]
        assert "could not read: [Errno 13] Permission denied" in results["public_tokenize"].output
        assert secret_text_in(failed_outputs(results) + results["public_tokenize"].output) == []
    finally:
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)
