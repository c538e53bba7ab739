"""A fork server: a clean process that has imported numpy (and torch) once and forks each new worker.

Why: a worker started with exec spends most of its start in `import torch` (1.1-1.3 s of CPU
on a 2-core machine, numpy alone about 0.1 s), and a batch, a test suite or a restarted worker
starts hundreds. Forked from a process that already holds those modules, a worker starts in a few
milliseconds, with the same confinement: it applies the same `confine.Plan`, with the same code,
before anything of the student's runs.

What keeps it as safe as exec:
  * the server is started with exec, with the worker's clean environment, and holds nothing of
    the grader's: no reference, no hidden checks, no secret; it never runs student code;
  * each worker is forked twice (the middle process exits at once), so that it is adopted by the
    grader, a child subreaper: the grader waits for it, reads its exit status and kills its tree
    exactly as for a worker it started itself;
  * the worker closes every descriptor but its two pipes (the server's socket included), starts a
    session of its own, and reports back only after `confine` succeeded; a failure is the
    grader's "could not start";
  * the server is non-dumpable (a worker of the same uid cannot read or write its memory),
    ignores Ctrl-C (the grader's to handle) and dies with the grader; if a worker kills or stops
    it anyway, the grader starts another, and after a second failure starts workers with exec.

Linux only, CPU workers only (CUDA must not be initialised before a fork, and its workers are
few), and only where a worker cannot write the engine copy its server shares with later workers
(Landlock, or a worker user: lifecycle.py decides); elsewhere `server` returns None, or is not
asked, and the worker starts with exec.
"""
from __future__ import annotations

import atexit
import ctypes
import gc
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from autograder.sandbox.confine import WORKER_FLAGS, Plan, Prepared, confine, worker_env
from autograder.sandbox.linux import HAVE_PROC, LIBC, PR_SET_DUMPABLE

_PR_SET_PDEATHSIG = 1
_FIRST_ANSWER = 120.0  # wall seconds for the server's start (its imports) and the first worker
_ANSWER = 30.0  # wall seconds for each later worker
AVAILABLE = LIBC is not None and HAVE_PROC and hasattr(socket, "send_fds")

_servers: dict[tuple, "ForkServer"] = {}
_failures: dict[tuple, int] = {}  # servers that died or stopped answering, per key
_stopped_sites: list[Path] = []  # engine copies of stopped servers: their workers may still import from them


class ForkServerDown(Exception):
    """The server died, or did not answer in time: the caller starts the worker with exec."""


class AdoptedProcess:
    """A worker forked by the server and adopted by this process: what `subprocess.Popen` offers."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: it is gone, how is unknown
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
            time.sleep(0.002)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def server(python: str, preload: tuple[str, ...]) -> "ForkServer | None":
    """The running server for workers of `python` that preload `preload`, started now if needed;
    None where there is none (not Linux, or two of them failed in this process): use exec."""
    key = (python, preload)
    if not AVAILABLE or _failures.get(key, 0) >= 2:
        return None
    if key not in _servers:
        try:
            _servers[key] = ForkServer(python, preload)
        except ForkServerDown:
            _failures[key] = _failures.get(key, 0) + 1
            return None
    return _servers[key]


def failed(broken: "ForkServer") -> None:
    """`broken` died or stopped answering: stop it; the next worker gets a new server."""
    key = (broken.python, broken.preload)
    _failures[key] = _failures.get(key, 0) + 1
    if _servers.get(key) is broken:
        del _servers[key]
    broken.stop()


@atexit.register
def stop_all() -> None:
    """Stop every server and remove the engine copies (at exit: no worker of this process is left)."""
    from autograder.sandbox.files import remove_tree

    for server in list(_servers.values()):
        server.stop()
    _servers.clear()
    while _stopped_sites:
        remove_tree(_stopped_sites.pop())


class ForkServer:
    """The grader's side: start the server, ask it for workers, stop it."""

    def __init__(self, python: str, preload: tuple[str, ...]):
        from autograder.sandbox.files import copy_engine, temp_folder
        from autograder.sandbox.limits import is_root

        self.python, self.preload = python, preload
        self.sitedir = temp_folder("forkserver")
        copy_engine(self.sitedir, readable_by_all=is_root())
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        bootstrap = ("import sys; sys.path.insert(0, sys.argv[1]); "
                     "from autograder.sandbox.forkserver import serve; serve(sys.argv[1:])")
        try:
            self.proc = subprocess.Popen(
                [python, *WORKER_FLAGS, "-c", bootstrap, str(self.sitedir), str(theirs.fileno()), *preload],
                cwd=self.sitedir, env=worker_env(str(self.sitedir), False), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(theirs.fileno(),),
                preexec_fn=_die_with_parent)
        except (OSError, subprocess.SubprocessError) as exc:
            self.proc = None
            self.stop()
            raise ForkServerDown(str(exc)) from None
        finally:
            theirs.close()
        self.answered = False

    def spawn(self, plan: Plan, env: dict, fds: list[int]) -> AdoptedProcess:
        """Fork a worker that confines itself by `plan`, gets `env` and serves on fds[0] (read) and
        fds[1] (write); fds[2] is its Landlock ruleset where the plan has one. Raises ForkServerDown
        (use exec) where the server is gone or the worker could not start (a limit of the server's that
        cannot be reset, say)."""
        try:
            socket.send_fds(self.sock, [json.dumps({"plan": asdict(plan), "env": env}).encode()], fds)
        except OSError as exc:
            raise ForkServerDown(str(exc)) from None
        try:
            ready, _, _ = select.select([self.sock], [], [], _ANSWER if self.answered else _FIRST_ANSWER)
            data = self.sock.recv(1 << 16) if ready else b""
        except OSError as exc:  # it died (ECONNRESET)
            raise ForkServerDown(str(exc)) from None
        if not data:
            raise ForkServerDown("no answer")
        self.answered = True
        reply = json.loads(data)
        pid = reply.get("pid")
        worker = AdoptedProcess(pid) if type(pid) is int else None
        if worker is not None and reply.get("error") is None:
            try:  # adopted by this subreaper by now (the middle process was reaped before the answer)
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                worker.kill()
                raise ForkServerDown("its worker was not adopted by the grader") from None
            if done:  # already gone: its status is kept for `_death`
                worker.returncode = os.waitstatus_to_exitcode(status)
            return worker
        if worker is not None:
            worker.kill()
            worker.wait(10)
        # a server that answers with an error is not trusted again: replaced, and this worker started with
        # exec (where the failure is the worker's own, exec reports it too)
        raise ForkServerDown(reply.get("error") or "the worker could not be forked")

    def stop(self) -> None:
        """Kill the server; its engine copy stays until exit (`stop_all`), for workers it forked."""
        self.sock.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
        _stopped_sites.append(self.sitedir)


def _die_with_parent() -> None:
    """In the server's child before exec: SIGKILL when the grader ends, however it ends."""
    if LIBC is not None:
        LIBC.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))


# ---- the server's side ------------------------------------------------------------------------
def serve(argv: list[str]) -> None:
    """argv: [site dir, socket fd, modules to import once ("torch")]. Answers until the grader goes."""
    site, sock = argv[0], socket.socket(fileno=int(argv[1]))
    preload = tuple(argv[2:])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    LIBC.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0),
               ctypes.c_ulong(0))
    from autograder.sandbox import support, worker  # noqa: F401 - every worker loads them
    if "torch" in preload:
        import torch  # noqa: F401
        from autograder.sandbox import simulated_device
        simulated_device.install()  # what a worker's load does first, done once for all its workers
    # Every object so far to the collector's permanent generation: a worker's collections then never
    # write to the headers of what it shares with this process, so they stay shared pages instead of
    # copies (about 20 MiB less per worker with torch, measured by bench/otter_comparison.py).
    gc.freeze()
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        except OSError:
            os._exit(0)
        if not data:  # the grader closed its end
            os._exit(0)
        try:
            reply = _fork_worker(sock, site, preload, json.loads(data), fds)
        except Exception as exc:  # noqa: BLE001 - a broken request costs this worker, not the server
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        for fd in fds:
            os.close(fd)
        sock.sendall(json.dumps(reply).encode())


def _fork_worker(sock: socket.socket, site: str, preload: tuple, request: dict, fds: list[int]) -> dict:
    """Fork twice; the worker confines itself and says so on a status pipe (the middle process
    first writes its pid). Returns {"pid": ...} or {"pid": ..., "error": ...}."""
    plan, env = Plan.from_json(request["plan"]), request["env"]
    status_r, status_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        try:
            pid = os.fork()
            if pid == 0:
                _become_worker(sock, status_r, status_w, site, preload, plan, env, fds)
            os.write(status_w, b"pid %d\n" % pid)
        finally:
            os._exit(0)
    os.close(status_w)
    said, deadline = b"", time.monotonic() + _ANSWER
    while time.monotonic() < deadline:
        ready, _, _ = select.select([status_r], [], [], deadline - time.monotonic())
        chunk = os.read(status_r, 4096) if ready else b""
        if not chunk:
            break
        said += chunk
    os.close(status_r)
    os.waitpid(middle, 0)
    lines = said.split(b"\n")  # "pid N" from the middle process, "ok" or the error from the worker, either order
    pids = [int(line[4:]) for line in lines if line.startswith(b"pid ") and line[4:].isdigit()]
    if not pids:
        return {"error": "the worker could not be forked"}
    if b"ok" not in lines:
        told = [line.decode(errors="replace") for line in lines if line and not line.startswith(b"pid ")]
        return {"pid": pids[0], "error": "; ".join(told) or "the worker died before it was confined"}
    return {"pid": pids[0]}


def _become_worker(sock, status_r: int, status_w: int, site: str, preload: tuple, plan: Plan, env: dict,
                   fds: list[int]) -> None:
    """In the forked worker: what exec's Popen and its preexec_fn do, in the same order; never returns."""
    try:
        rfd, wfd = fds[0], fds[1]
        ruleset = fds[2] if plan.landlock else None
        sock.close()
        os.close(status_r)
        os.setsid()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(plan.scratch)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # read again from TMPDIR
        keep = {0, 1, 2, rfd, wfd, status_w, ruleset}  # as exec's close_fds: nothing else is inherited
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        confine(plan, ruleset, Prepared(plan))
        if ruleset is not None:
            os.close(ruleset)
        # dumpable again, as after exec: the grader (same uid) reads its /proc files; nothing here is secret
        LIBC.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0))
        sys.argv = ["-c", site]
    except BaseException as exc:  # noqa: BLE001 - reported to the grader as "could not start"
        try:
            os.write(status_w, f"{type(exc).__name__}: {exc}".replace("\n", " ").encode() + b"\n")
        finally:
            os._exit(1)
    os.write(status_w, b"ok\n")
    os.close(status_w)
    try:
        from autograder.sandbox.worker import main
        main([site, str(rfd), str(wfd), *preload])
    finally:
        os._exit(0)
