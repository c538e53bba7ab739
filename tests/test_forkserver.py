"""Workers forked from the fork server are confined exactly as workers started with exec, hold
nothing of the grader's, and a server that dies or stops answering costs only time."""
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from autograder.checking.remote import Student
from autograder.sandbox import forkserver
from autograder.sandbox.lifecycle import Sandbox, WorkerFailure
from autograder.sandbox.limits import Limits, landlock_on

FAST = Limits(call_timeout=5, load_timeout=10)
FORKS = forkserver.AVAILABLE and landlock_on(Limits())
pytestmark = pytest.mark.skipif(not FORKS, reason="workers are forked on Linux with Landlock only")

PROBE = textwrap.dedent("""
    import os, sys, resource
    def probe():
        status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
        limits = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_CORE", "RLIMIT_NPROC")
        fds = [os.path.join("/proc/self/fd", fd) for fd in os.listdir("/proc/self/fd")]
        return {"fds": sorted(os.readlink(fd).split("[")[0] for fd in fds if os.path.exists(fd)), "leader": os.getsid(0) == os.getpid(),
                "parent": os.getppid(), "pid": os.getpid() == 1, "cwd": os.getcwd(), "env": dict(os.environ),
                "mapped": int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE"),
                "limits": {name: list(resource.getrlimit(getattr(resource, name))) for name in limits},
                "status": {k: status[k].strip() for k in ("NoNewPrivs", "CapEff", "CapPrm", "CapBnd", "Threads")},
                "userns": os.readlink("/proc/self/ns/user"), "mountns": os.readlink("/proc/self/ns/mnt"),
                "modules": sorted(m for m in sys.modules if m.startswith("autograder") or m == "psutil")}
    def add(x, y):
        return x + y
""")


@pytest.fixture
def own_servers(monkeypatch):
    """This test's own servers and failure counts, stopped at its end."""
    servers: dict = {}
    monkeypatch.setattr(forkserver, "_servers", servers)
    monkeypatch.setattr(forkserver, "_failures", {})
    yield servers
    for server in list(servers.values()):
        server.stop()


def probed(import_torch=False) -> tuple[dict, bool]:
    """What a worker sees of itself (and who waits for the process the grader knows), and whether it was
    forked by a server."""
    box = Sandbox([{"index": 0, "number": 1, "source": PROBE}], limits=FAST, import_torch=import_torch)
    try:
        seen = Student(box, timeout=5).probe()
        seen["waited_by"] = psutil.Process(box.proc.pid).ppid()
        return seen, isinstance(box.proc, forkserver.AdoptedProcess)
    finally:
        box.close()


def test_a_forked_worker_is_confined_as_one_started_with_exec(monkeypatch, own_servers):
    forked, was_forked = probed()
    assert was_forked and own_servers
    with monkeypatch.context() as m:
        m.setattr(forkserver, "AVAILABLE", False)
        started, was_forked = probed()
    assert not was_forked
    for key in ("fds", "leader", "status"):
        assert forked[key] == started[key], key
    # the address space: what each had mapped at its load plus the same budget (a forked worker maps more)
    assert {k: v for k, v in forked["limits"].items() if k != "RLIMIT_AS"} == \
        {k: v for k, v in started["limits"].items() if k != "RLIMIT_AS"}
    for probe in (forked, started):
        room = probe["limits"]["RLIMIT_AS"][0] - probe["mapped"]
        assert FAST.memory_bytes - (64 << 20) < room <= FAST.memory_bytes, room
    assert forked["waited_by"] == started["waited_by"] == os.getpid()  # adopted: this process waits for it
    # where it has a PID namespace of its own the worker is its PID 1, its parent (the keeper) outside it
    assert forked["parent"] == started["parent"] and forked["pid"] == started["pid"]
    assert forked["leader"] and forked["status"]["NoNewPrivs"] == "1" and forked["status"]["Threads"] == "1"
    assert forked["limits"]["RLIMIT_CORE"] == [0, 0]
    for ns in ("user", "mnt"):  # a namespace of its own exactly where a worker started with exec gets one
        mine = os.readlink(f"/proc/self/ns/{ns}")
        key = "userns" if ns == "user" else "mountns"
        assert (forked[key] != mine) == (started[key] != mine), ns
    for probe in (forked, started):  # each its own scratch, and the environment it was given, nothing else
        assert probe["env"]["HOME"] == probe["env"]["TMPDIR"] == probe["cwd"]
    assert {k: v for k, v in forked["env"].items() if k not in ("HOME", "TMPDIR")} == \
        {k: v for k, v in started["env"].items() if k not in ("HOME", "TMPDIR")}


def test_a_forked_worker_holds_nothing_of_the_graders_side(own_servers):
    for import_torch in (False, True):
        seen, was_forked = probed(import_torch)
        assert was_forked, import_torch  # a torch server that cannot start would send every worker to exec
        modules = seen["modules"]
        assert modules and all(m == "autograder" or m.startswith("autograder.sandbox") for m in modules), modules
        assert "psutil" not in modules
    env = psutil.Process(next(iter(own_servers.values())).proc.pid).environ()
    assert set(env) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "MPLBACKEND",
                        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "USER", "LOGNAME"}


def test_the_server_ignores_ctrl_c(own_servers):
    probed()
    pid = next(iter(own_servers.values())).proc.pid
    status = Path(f"/proc/{pid}/status").read_text()
    assert "SigIgn:" in status and int(status.split("SigIgn:")[1].split()[0], 16) & (1 << (signal.SIGINT - 1))
    os.kill(pid, signal.SIGINT)
    assert probed()[0]["leader"] and next(iter(own_servers.values())).proc.pid == pid


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_a_dead_or_stopped_server_is_replaced_then_exec_is_used(monkeypatch, own_servers, how):
    monkeypatch.setattr(forkserver, "_ANSWER", 2.0)
    pids = []
    for _ in range(4):
        box = Sandbox([{"index": 0, "number": 1, "source": PROBE}], limits=FAST)
        try:
            assert Student(box, timeout=5).add(2, 3) == 5  # every worker answers, whatever befell the server
            pids.append(isinstance(box.proc, forkserver.AdoptedProcess))
        finally:
            box.close()
        for server in own_servers.values():
            os.kill(server.proc.pid, how)
    # the worker that found the server gone started with exec, the next one a fresh server; after a second failure, exec
    assert pids == [True, False, True, False]
    assert not own_servers and forkserver.server(sys.executable, ()) is None


def test_a_worker_that_cannot_confine_itself_is_a_clear_failure(own_servers, monkeypatch):
    for available in (True, False):
        monkeypatch.setattr(forkserver, "AVAILABLE", available)
        box = Sandbox([{"index": 0, "number": 1, "source": PROBE}], limits=FAST)
        os.rmdir(box.scratch)  # its chdir fails, before anything of the student's runs
        with pytest.raises(WorkerFailure) as info:
            box.start()
        box.close()
        assert info.value.kind == "unavailable" and "could not start" in info.value.detail
        assert "No such file or directory" in info.value.detail


def test_the_server_dies_with_its_grader():
    code = ("import os, sys; from autograder.sandbox.lifecycle import Sandbox; from autograder.sandbox import forkserver\n"
            "box = Sandbox([{'index': 0, 'number': 1, 'source': 'x = 1'}]); box.ensure_started()\n"
            "print(next(iter(forkserver._servers.values())).proc.pid, box.proc.pid, flush=True); os._exit(0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(forkserver.__file__).parents[2], check=True).stdout.split()
    server, worker = int(out[0]), int(out[1])
    for pid in (server, worker):  # the server is killed; the worker reads the end of its pipe and exits
        try:
            psutil.Process(pid).wait(30)
        except psutil.NoSuchProcess:
            pass
