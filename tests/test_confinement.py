"""Each worker is boxed by ids and namespaces (issue 29), attacked as a root batch's workers are.

A root batch without a worker user gives every worker a uid of its own (not 0), its own PID and IPC
namespaces (a keeper outside, a tiny init as PID 1, the worker as PID 2) and, where they can be made,
cgroups below the grader's own. These tests run real workers (forked from the fork server, as a batch's
are) and check that what one worker does reaches no one else and leaves nothing behind.
"""
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import psutil
import pytest

from autograder.checking.remote import Student, StudentCrash
from autograder.sandbox import forkserver
from autograder.sandbox.cgroups import remove_cgroups
from autograder.sandbox.lifecycle import Sandbox
from tests.helpers import machine_pid, v2_mount
from autograder.sandbox.limits import USER_ENV, Limits, landlock_on
from autograder.sandbox.linux import HAVE_PROC
from autograder.sandbox.namespaces import WORKER_UID_BASE

pytestmark = pytest.mark.skipif(not (HAVE_PROC and hasattr(os, "geteuid") and os.geteuid() == 0),
                                reason="root on Linux: the mode a TA's batch runs in as root")
SYSCALLS = {"x86_64": {"ioprio_set": 251, "clone3": 435}, "aarch64": {"ioprio_set": 30, "clone3": 435}}
CALLS = SYSCALLS.get(platform.machine())
LIMITS = Limits(call_timeout=10, load_timeout=20)

CODE = '''
import ctypes, os, resource, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
CALLS = {calls!r}
SHM_KEY, MSG_KEY, IPC_CREAT = 0x4C4D4701, 0x4C4D4702, 0o1000
go_r, go_w = os.pipe()

def ok():
    return 2

def me():
    return {{"uid": os.getuid(), "pid": os.getpid(),
            "ns": {{ns: os.readlink(f"/proc/self/ns/{{ns}}") for ns in ("user", "pid", "ipc", "uts", "mnt", "net", "cgroup")}},
            "cgroup": open("/proc/self/cgroup").read()}}

def lower(pid):
    """Every way to lower another process's limits or priority; the ones that worked."""
    worked = []
    for name, limit in (("cpu", resource.RLIMIT_CPU), ("nofile", resource.RLIMIT_NOFILE)):
        try:
            resource.prlimit(pid, limit, (4, 4))
            worked.append(name)
        except OSError:
            pass
    try:
        os.setpriority(os.PRIO_PROCESS, pid, 19)
        worked.append("nice")
    except OSError:
        pass
    if libc.syscall(CALLS["ioprio_set"], 1, pid, 3 << 13) == 0:  # IOPRIO_WHO_PROCESS, the idle class
        worked.append("ioprio")
    return worked

def lower_all(pids):
    return {{str(pid): lower(pid) for pid in pids}}

def lower_own_child():
    """The same attacks on a child of its own: they work there."""
    pid = os.fork()
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    try:
        return lower(pid)
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)

def burn(w, cpu):
    os.write(w, b"%d " % os.getpid())
    os.read(go_r, 1)  # wait for the call whose deadline it should reach
    while time.process_time() < cpu:
        pass
    time.sleep(600)

def orphans(cpu):
    """Three orphans that hide each their own way; their machine pids."""
    r, w = os.pipe()
    if os.fork() == 0:  # a new session, then a double fork
        os.setsid()
        if os.fork() == 0:
            burn(w, cpu)
        os._exit(0)
    if os.fork() == 0:  # a nested user namespace, then a double fork
        libc.unshare(0x10000000)
        if os.fork() == 0:
            burn(w, cpu)
        os._exit(0)
    args = (ctypes.c_uint64 * 11)()
    args[0] = 0x00008000  # clone3 with CLONE_PARENT: a sibling of the worker, a child of its parent
    child = libc.syscall(CALLS["clone3"], ctypes.byref(args), ctypes.sizeof(args))
    if child == 0:
        burn(w, cpu)
    said = b""
    while len(said.split()) < 3:
        said += os.read(r, 100)
    ns = os.readlink("/proc/self/ns/pid")  # the grader finds them on the machine by it (tests.helpers.machine_pid)
    return [(ns, int(pid)) for pid in said.split()]

def idle(seconds):
    os.write(go_w, b"xxx")  # the orphans start burning now
    time.sleep(seconds)
    return 1

def plant():
    shm = libc.shmget(SHM_KEY, 1 << 20, IPC_CREAT | 0o666)
    msq = libc.msgget(MSG_KEY, IPC_CREAT | 0o666)
    note = ctypes.create_string_buffer(8 + 16)
    ctypes.memmove(note, ctypes.byref(ctypes.c_long(1)), 8)
    ctypes.memmove(ctypes.addressof(note) + 8, b"from worker A", 13)
    sent = libc.msgsnd(msq, note, 13, 0)
    try:  # Landlock forbids /dev/shm; without it the worker has a private one
        with open("/dev/shm/lmgrade-note", "w") as f:
            f.write("from worker A")
    except PermissionError:
        pass
    return shm >= 0 and msq >= 0 and sent == 0

def find():
    return {{"shm": libc.shmget(SHM_KEY, 0, 0) >= 0, "msg": libc.msgget(MSG_KEY, 0) >= 0,
            "posix": os.path.exists("/dev/shm/lmgrade-note")}}

def start_program(how):
    import subprocess
    try:
        if how == "subprocess":
            subprocess.run(["/bin/true"])
        elif how == "execv":
            os.execv("/bin/true", ["true"])
        else:  # a program it wrote into its own scratch
            with open("prog.sh", "w") as f:
                f.write("#!/bin/sh\\nexit 0\\n")
            os.chmod("prog.sh", 0o755)
            subprocess.run(["./prog.sh"])
        return "started"
    except OSError as exc:
        return type(exc).__name__

def open_files():
    return resource.getrlimit(resource.RLIMIT_NOFILE)
'''.format(calls=CALLS)


def cells():
    return [{"index": 0, "number": 1, "source": CODE}]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def state(pid: int) -> tuple:
    """What the attacks could change in a process: its CPU and file limits, nice value, I/O priority."""
    proc = psutil.Process(pid)  # limits from /proc: prlimit would need CAP_SYS_RESOURCE, which a container may lack
    limits = [line for line in Path(f"/proc/{pid}/limits").read_text().splitlines()
              if line.startswith(("Max cpu time", "Max open files"))]
    return (limits, proc.nice(), tuple(proc.ionice()))


@pytest.mark.skipif(CALLS is None, reason="syscall numbers known for x86_64 and aarch64")
def test_no_worker_is_root_and_none_can_lower_anyone_elses_limits_or_priority():
    outside = subprocess.Popen(["sleep", "300"])  # a root process outside lmgrade (a TA's shell, another job)
    a, b = Sandbox(cells(), limits=LIMITS), Sandbox(cells(), limits=LIMITS)
    try:
        sa, sb = Student(a, timeout=10), Student(b, timeout=10)
        me_a, me_b = sa.me(), sb.me()
        assert me_a["uid"] != 0 and me_b["uid"] != 0 and me_a["uid"] != me_b["uid"]
        assert me_a["uid"] == WORKER_UID_BASE + a.proc.pid  # a uid from the grader's range, unique while it lives
        assert me_a["pid"] == 2  # the init of its own PID namespace is 1
        for ns, mine in me_a["ns"].items():  # every namespace its own, none shared with the sibling
            assert mine != os.readlink(f"/proc/self/ns/{ns}") and mine != me_b["ns"][ns], ns
        if a.cgroups:  # its cgroups' paths are the roots of its cgroup namespace
            assert "lmgrade-worker" not in me_a["cgroup"], me_a["cgroup"]
        assert sa.lower_own_child() == ["cpu", "nofile", "nice", "ioprio"]  # the attacks work where allowed
        sibling = machine_pid((me_b["ns"]["pid"], me_b["pid"]))
        assert sibling is not None and sibling != b.proc.pid
        targets = {"grader": os.getpid(), "sibling keeper": b.proc.pid, "sibling worker": sibling,
                   "outside": outside.pid}
        server = next(iter(forkserver._servers.values()), None)
        if server is not None:
            targets["fork server"] = server.proc.pid
        before = {name: state(pid) for name, pid in targets.items()}
        tried = sa.lower_all(list(targets.values()))
        assert all(worked == [] for worked in tried.values()), tried
        assert {name: state(pid) for name, pid in targets.items()} == before
        assert sb.ok() == 2
    finally:
        a.close(), b.close()
        outside.kill()
        outside.wait()


@pytest.mark.skipif(CALLS is None, reason="syscall numbers known for x86_64 and aarch64")
def test_orphans_however_they_hide_are_counted_and_die_with_their_worker():
    # three orphans burn 0.8 CPU s each once the call starts, then sleep: its 2 CPU s run out only if all
    # three are counted, however long the loaded machine takes (the wall backstop is 125 s)
    box = Sandbox(cells(), limits=Limits(call_timeout=2, load_timeout=20, wall_factor=60))
    try:
        student = Student(box, timeout=10)
        pids = [machine_pid(orphan) for orphan in student.orphans(0.8)]
        assert len(pids) == 3 and None not in pids and all(alive(pid) for pid in pids)
        with pytest.raises(StudentCrash, match=r"did not finish within [0-9.]+ s of CPU time"):
            Student(box, timeout=2).idle(300)
        assert not any(alive(pid) for pid in pids)
        assert student.ok() == 2  # a fresh worker
    finally:
        box.close()


def sysv_keys(kind: str) -> set[int]:
    try:
        lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {int(line.split()[0]) for line in lines}


def test_ipc_objects_reach_no_other_worker_and_vanish_with_their_own():
    a, b = Sandbox(cells(), limits=LIMITS), Sandbox(cells(), limits=LIMITS)
    try:
        sa, sb = Student(a, timeout=10), Student(b, timeout=10)
        assert sa.plant()
        assert sa.find()["shm"] and sa.find()["msg"]  # there for the worker that made them
        assert sb.find() == {"shm": False, "msg": False, "posix": False}  # a classmate at the same time
        assert 0x4C4D4701 not in sysv_keys("shm") and 0x4C4D4702 not in sysv_keys("msg")  # nor the machine
        assert not Path("/dev/shm/lmgrade-note").exists()
        a.close()
        later = Sandbox(cells(), limits=LIMITS)  # the next student's worker
        try:
            assert Student(later, timeout=10).find() == {"shm": False, "msg": False, "posix": False}
        finally:
            later.close()
    finally:
        a.close(), b.close()


def test_a_forked_worker_can_start_no_program():
    if not (forkserver.AVAILABLE and landlock_on(LIMITS)):
        pytest.skip("workers are forked where Landlock is")
    box = Sandbox(cells(), limits=LIMITS)
    try:
        student = Student(box, timeout=10)
        assert student.ok() == 2 and isinstance(box.proc, forkserver.AdoptedProcess)
        for how in ("subprocess", "execv", "own_program"):
            assert student.start_program(how) == "PermissionError", how
        assert student.ok() == 2
    finally:
        box.close()


def test_each_worker_starts_with_the_graders_limits_whatever_the_server_has():
    if not forkserver.AVAILABLE:
        pytest.skip("no fork server here")
    box = Sandbox(cells(), limits=LIMITS)
    try:
        student = Student(box, timeout=10)
        student.ok()
        server = next(iter(forkserver._servers.values()))
        resource.prlimit(server.proc.pid, resource.RLIMIT_NOFILE, (16, 16))  # what a worker of its uid once did
        box.close()
        box = Sandbox(cells(), limits=LIMITS)
        assert tuple(Student(box, timeout=10).open_files()) == resource.getrlimit(resource.RLIMIT_NOFILE)
    finally:
        box.close()


IN_A_CGROUP = textwrap.dedent(r'''
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    from autograder.checking.remote import Student
    from autograder.sandbox.lifecycle import Sandbox
    from autograder.sandbox.limits import Limits
    from autograder.sandbox.namespaces import in_user_namespace
    code = sys.argv[2] + """
    def bomb(n):
        made = 0
        for _ in range(n):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                os.setsid()
                os.read(go_r, 1)  # burns from its release on, between the worker's calls
                while True:
                    pass
            made += 1
        return made

    def release(n):
        os.write(go_w, b"x" * n)
        return n

    def work(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return "done"
    """
    limits = Limits(call_timeout=3, load_timeout=20, process_margin=64)
    cells = [{"index": 0, "number": 1, "source": code}]
    a, b = Sandbox(cells, limits=limits), Sandbox(cells, limits=limits)
    sa, sb = Student(a, timeout=3), Student(b, timeout=3)
    seen = {"ok": sa.ok() + sb.ok(), "groups": [str(g) for g in a.cgroups]}
    seen["made"] = sa.bomb(500)  # CPU-burning orphans, as many as it may make
    sa.release(seen["made"])
    b.close()  # the classmate's worker starts again beside them ...
    b = Sandbox(cells, limits=limits)
    sb = Student(b, timeout=3)
    started = time.monotonic()
    seen["work"] = sb.work(1.0)  # ... and 1 CPU s of its work ends within its deadline (wall backstop 20 s)
    seen["wall"] = time.monotonic() - started
    userns = a.userns
    a.close()
    seen["left"] = len(in_user_namespace(userns))
    seen["groups_left"] = [g for g in seen["groups"] if __import__("os").path.exists(g)]
    b.close()
    print(json.dumps(seen))
''')


def test_a_fork_bomb_of_cpu_burners_changes_nothing_for_a_sibling_with_the_grader_in_a_cgroup():
    """The grader runs in a cgroup that is not the root one (as under a session scope or a container's
    cgroup): each worker still gets its cgroups below it, so a bomb of CPU-burning orphans takes only
    its own worker's share; it is bounded, and nothing of it outlives its worker."""
    made, hierarchies = [], []
    for controller in ("pids", "cpu", "cpuacct"):
        hierarchy = Path("/sys/fs/cgroup") / controller
        if (hierarchy / "cgroup.procs").exists():
            hierarchies.append(hierarchy)
    if v2_mount() is not None:  # and in cgroup v2: its workers' v2 cgroups (counting, cgroup.kill) go below it too
        hierarchies.append(v2_mount())
    for hierarchy in hierarchies:
        try:
            made.append(Path(tempfile.mkdtemp(prefix="lmgrade-test-grader-", dir=hierarchy)))
        except OSError:  # read-only here (an unprivileged container)
            pass
    if not made:
        pytest.skip("no cgroup hierarchy here in which a cgroup can be made for the grader")

    def join() -> None:
        for group in made:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    repo = str(Path(__file__).resolve().parents[1])
    try:
        proc = subprocess.run([sys.executable, "-c", IN_A_CGROUP, repo, CODE], preexec_fn=join, capture_output=True,
                              text=True, timeout=300, cwd="/")
    finally:
        remove_cgroups(made)  # children first (the grader's leaf, or left by a failed run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = __import__("json").loads(proc.stdout.strip().splitlines()[-1])
    assert seen["ok"] == 4
    assert seen["groups"] and all(any(g.startswith(str(m) + "/") for m in made) or "/memory/" in g
                                  for g in seen["groups"]), seen["groups"]  # below the grader's own cgroups
    assert 0 < seen["made"] < 64
    assert seen["work"] == "done", seen
    assert seen["left"] == 0 and seen["groups_left"] == []


def test_a_worker_user_that_cannot_read_the_interpreter_is_refused_before_any_grading(monkeypatch):
    """As a TA might set it up: a Python the worker's user cannot read. The grader refuses at once, naming
    the path and what to change, instead of letting every check blame the student."""
    private = Path(tempfile.mkdtemp(prefix="lmgrade-private-python-"))  # mode 0700, root's
    try:
        python = private / "python3"
        shutil.copy2(os.path.realpath(sys.executable), python)
        os.chmod(python, 0o700)
        for setting in ("nobody", None):  # a named worker user; a root batch's own uids
            if setting:
                monkeypatch.setenv(USER_ENV, setting)
            else:
                monkeypatch.delenv(USER_ENV, raising=False)
            with pytest.raises(ValueError) as info:
                Sandbox(cells(), limits=Limits(worker_python=str(python)))
            text = str(info.value)
            assert "Refusing to grade" in text and str(private) in text and "chmod o+rX" in text, text
    finally:
        shutil.rmtree(private)


def test_a_worker_user_runs_the_graders_python_from_roots_closed_home(monkeypatch):
    """LMGRADE_WORKER_USER=nobody with this venv, whose Python lives under root's home (mode 0700 here):
    the worker's view bridges that folder, and a forked worker imports what it needs later (zipfile)."""
    monkeypatch.setenv(USER_ENV, "nobody")
    box = Sandbox([{"index": 0, "number": 1, "source": "import os\ndef late():\n    import zipfile, json\n"
                    "    return os.getuid()\n"}], limits=LIMITS)
    try:
        import pwd
        assert Student(box, timeout=10).late() == pwd.getpwnam("nobody").pw_uid
    finally:
        box.close()
