"""Two workers graded side by side as root cannot reach each other (docs/security.md, per mode).

Each worker has its own user namespace (its keyrings and process count), its own mount namespace
with a bounded tmpfs scratch, its own network namespace (abstract sockets), and the grader counts
and kills every process in its user namespace, orphans included. The attacks run as a batch's
workers would, as root with no worker user.
"""
import os
import platform

import psutil
import pytest

from autograder.checking.remote import Student, StudentCrash, StudentError
from autograder.sandbox import lifecycle as sandbox
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits
from autograder.sandbox.linux import HAVE_PROC
from autograder.sandbox.namespaces import in_user_namespace
from tests.helpers import machine_pid

pytestmark = pytest.mark.skipif(not (HAVE_PROC and hasattr(os, "geteuid") and os.geteuid() == 0),
                                reason="root on Linux: the mode a TA's batch runs in as root")
SYSCALLS = {"x86_64": {"add_key": 248, "request_key": 249}, "aarch64": {"add_key": 217, "request_key": 218}}
CALLS = SYSCALLS.get(platform.machine())

CODE = '''
import ctypes, os, socket, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CALLS = {calls!r}

def ok():
    return 2

def find_key(description):
    """request_key: searches this process's thread, process and session keyrings and its user keyring."""
    got = libc.syscall(CALLS["request_key"], b"user", description.encode(), None, 0)
    return int(got)

def plant_key(description):
    for keyring in (-3, -4):  # the session keyring, the user keyring
        libc.syscall(CALLS["add_key"], b"user", description.encode(), b"note", 4, keyring)
    return find_key(description) > 0

def listen():
    served = []
    for address in ("sock", "\\0lmgrade-isolation-note"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(address)
        s.listen(1)
        served.append(s)
    globals()["served"] = served
    return os.path.abspath("sock")

def reach(path):
    reached = []
    for address in (path, "\\0lmgrade-isolation-note"):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(address)
            reached.append(address)
        except OSError:
            pass
        s.close()
    return reached

def fork_bomb(n):
    made = 0
    for _ in range(n):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        made += 1
    return made

def orphan(cpu=None):
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(w, b"%d" % os.getpid())  # its pid in the worker's PID namespace
            while cpu is None or time.process_time() < cpu:
                pass
            time.sleep(600)
        os._exit(0)
    return os.readlink("/proc/self/ns/pid"), int(os.read(r, 20))  # tests.helpers.machine_pid finds it

def idle(seconds):
    time.sleep(seconds)
    return 1

def pid_and_limit(pid):
    """Its own pid, and what prlimit on `pid` (a process outside, the grader) did."""
    import resource
    try:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (4, 4))
        return os.getpid(), "lowered"
    except OSError as exc:
        return os.getpid(), type(exc).__name__

def fill():
    written = 0
    for i in range(16):
        try:
            with open(f"fill{{i}}.bin", "wb") as f:
                for _ in range(16):
                    f.write(b"x" * (1 << 20))
                    written += 1 << 20
        except OSError:
            break
    return written
'''.format(calls=CALLS)


def pair(limits=Limits(call_timeout=10, load_timeout=20)):
    cells = [{"index": 0, "number": 1, "source": CODE}]
    a, b = Sandbox(cells, limits=limits), Sandbox(cells, limits=limits)
    sa, sb = Student(a, timeout=10), Student(b, timeout=10)
    assert sa.ok() == 2 and sb.ok() == 2
    if a.userns is None:
        a.close(), b.close()
        pytest.skip("user namespaces are disabled on this kernel (security.md: what holds then)")
    return a, b, sa, sb


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.skipif(CALLS is None, reason="keyring syscall numbers known for x86_64 and aarch64")
def test_keyrings_are_per_worker_and_root_keys_unseen():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    assert libc.syscall(CALLS["add_key"], b"user", b"lmgrade-planted", b"root secret", 11, -4) > 0  # root's @u
    a, b, sa, sb = pair()
    try:
        assert sa.find_key("lmgrade-planted") < 0 and sb.find_key("lmgrade-planted") < 0
        assert sa.plant_key("lmgrade-note")  # A sees its own note ...
        assert sb.find_key("lmgrade-note") < 0  # ... B does not
    finally:
        a.close(), b.close()


def test_no_socket_or_scratch_of_another_worker_is_reachable():
    a, b, sa, sb = pair()
    try:
        path = sa.listen()
        assert sa.reach(path) == [path, "\0lmgrade-isolation-note"]  # the attack works within one worker
        assert sb.reach(path) == []
    finally:
        a.close(), b.close()


def test_a_fork_bomb_is_bounded_and_the_other_worker_still_restarts():
    limits = Limits(call_timeout=10, load_timeout=20, process_margin=64)
    a, b, sa, sb = pair(limits)
    try:
        made = sa.fork_bomb(500)
        assert made < 64
        b.close()  # the other student's worker starts again while the bomb's processes live
        b = Sandbox([{"index": 0, "number": 1, "source": CODE}], limits=limits)
        assert Student(b, timeout=10).ok() == 2
        userns = a.userns
        assert len(in_user_namespace(userns)) > made // 2
        a.close()
        assert in_user_namespace(userns) == []  # every one of them is gone with the worker
    finally:
        a.close(), b.close()


def test_an_orphans_cpu_counts_against_its_worker_and_dies_with_it():
    # the orphan burns 3 CPU s, then sleeps: the call's 2 CPU s can only run out through the orphan's CPU,
    # however long the loaded machine takes to give it that (the wall backstop is 125 s)
    a, b, _, sb = pair(Limits(call_timeout=2, load_timeout=20, wall_factor=60))
    sa = Student(a, timeout=2)
    try:
        pid = machine_pid(sa.orphan(3.0))  # left the worker's session and process tree
        assert pid is not None and alive(pid)
        # the CPU deadline's message, not the wall backstop's ("did not finish: it ran ... s of wall-clock time")
        with pytest.raises(StudentCrash, match=r"did not finish within [0-9.]+ s of CPU time"):
            sa.idle(300)  # sleeps: only the orphan's CPU can end this call before its wall backstop
        assert not alive(pid)
        assert sb.idle(0) == 1
    finally:
        a.close(), b.close()


def test_scratch_is_bounded_in_total_not_only_per_file():
    a, b, sa, sb = pair(Limits(call_timeout=20, load_timeout=20, scratch_bytes=32 << 20))
    try:
        written = sa.fill()
        assert 16 << 20 <= written <= 32 << 20
        assert sb.fill() >= 16 << 20  # the other worker's scratch is its own
    except StudentError as exc:
        pytest.fail(f"filling the scratch should stop quietly at its bound: {exc}")
    finally:
        a.close(), b.close()


AS_A_USER = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1])
from autograder.checking.remote import Student, StudentCrash
from autograder.sandbox.lifecycle import Sandbox
from autograder.sandbox.limits import Limits
from autograder.sandbox.namespaces import in_user_namespace
code = sys.argv[2]
limits = Limits(call_timeout=2, load_timeout=20, process_margin=64, scratch_bytes=32 << 20)
cells = [{"index": 0, "number": 1, "source": code}]
a, b = Sandbox(cells, limits=limits), Sandbox(cells, limits=limits)
sa, sb = Student(a, timeout=10), Student(b, timeout=10)
seen = {"own_userns": sa.ok() == 2 and a.userns is not None}
if seen["own_userns"]:
    path = sa.listen()
    seen["reach_own"], seen["reach_other"] = sa.reach(path), sb.reach(path)
    if "request_key" in code:
        sa.plant_key("lmgrade-note")
        seen["other_key"] = sb.find_key("lmgrade-note")
    seen["pid_and_limit"] = sa.pid_and_limit(__import__("os").getpid())
    seen["forks"] = sa.fork_bomb(500)
    seen["b_after_bomb"] = sb.ok()
    userns = a.userns
    a.close()
    seen["left"] = len(in_user_namespace(userns))
    seen["fill"] = sb.fill()
b.close()
print(json.dumps(seen))
'''


def test_as_a_user_without_root_workers_are_apart_too(nobody_python):
    """A TA's batch as an ordinary user (here `nobody`): the same isolation from an unprivileged
    user namespace, where the kernel allows one (else the test says so and skips)."""
    import json
    import pwd
    import subprocess
    from pathlib import Path
    nobody = pwd.getpwnam("nobody")
    repo = str(Path(sandbox.__file__).resolve().parents[2])
    proc = subprocess.run([nobody_python, "-c", AS_A_USER, repo, CODE], user=nobody.pw_uid,
                          group=nobody.pw_gid, extra_groups=[], cwd="/", capture_output=True, text=True, timeout=240,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
                               # this throw-away interpreter reads its packages from the repository's
                               # venv, which Landlock's rules withhold; the namespaces are what is tested
                               "LMGRADE_LANDLOCK": "0"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    if not seen["own_userns"]:
        pytest.skip("this kernel gives ordinary users no user namespace (security.md: what holds then)")
    assert seen["reach_own"] and seen["reach_other"] == []
    assert seen.get("other_key", -1) < 0
    assert seen["forks"] < 64 and seen["b_after_bomb"] == 2 and seen["left"] == 0
    # PID 2 of a PID namespace of its own: the grader, of the same uid, has no pid it could name
    assert seen["pid_and_limit"] == [2, "ProcessLookupError"], seen
    assert 16 << 20 <= seen["fill"] <= 32 << 20
