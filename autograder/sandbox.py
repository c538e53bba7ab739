"""The trusted side of the worker: start it under limits, talk to it with deadlines, restart it.

Why: one hung or crashing function must cost only its own check. Every request has a deadline;
on a timeout or a dead worker every process the worker started is stopped and killed (however it
hid: a new session, a double fork) and a fresh worker reloads the submission (skipping any cell
that killed it at load time) before the next check.

Confinement, strongest available first (all applied in the child before exec):
  * as root with `LMGRADE_WORKER_USER` (Gradescope): the worker runs as that user, so it cannot
    read the grader's root-only files or write the results; and in a fresh network namespace;
  * Landlock (Linux >= 5.13, no privileges needed): reads only the Python installation, the
    engine and system directories, writes only its scratch dir; on newer kernels also no TCP
    (6.7) and no signals or abstract sockets outside its own processes (6.12);
  * everywhere: rlimits (address space, CPU, file size, no core dumps, processes where the
    kernel enforces them), its own session, a clean environment, no stdin/stdout/stderr.
The grader process itself becomes a child subreaper (orphans of the worker come back to it to
be killed) and non-dumpable (same-uid code cannot read or write its memory through /proc).
"""
from __future__ import annotations

import ctypes
import fcntl
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import wire

PACKAGE_DIR = Path(__file__).resolve().parent
USER_ENV = "LMGRADE_WORKER_USER"  # run the worker as this user when the grader is root
LANDLOCK_ENV = "LMGRADE_LANDLOCK"  # "0" turns Landlock off (troubleshooting a driver that needs more)


@dataclass(frozen=True)
class Limits:
    """Resource limits for the student's process (per worker), default deadlines, and how it is confined."""

    call_timeout: float = 20.0  # seconds of wall time for one request
    load_timeout: float = 30.0  # seconds for each graded cell to load
    memory_bytes: int = 3 << 30  # address space; CUDA needs more, so it is lifted there
    cpu_seconds: int = 1800  # CPU time of one worker over its whole life
    file_bytes: int = 64 << 20  # largest file the student's code may write
    max_restarts: int = 40  # after this many the remaining checks fail fast
    process_margin: int = 512  # tasks the worker may add to its user's count (RLIMIT_NPROC; root is exempt)
    worker_user: str | None = None  # as root: run the worker as this user (default: $LMGRADE_WORKER_USER)
    confine: bool = True  # Landlock where the kernel has it (files, TCP, signals)
    isolate_network: bool = True  # as root: a fresh network namespace, no interface up
    worker_python: str | None = None  # interpreter for the worker (default: the grader's own)


class WorkerFailure(Exception):
    """The worker timed out, died, or sent something unreadable. `kind` says which."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind = kind  # 'timeout', 'died', 'broken', 'unavailable'
        self.detail = detail


def worker_identity(user: str | None = None) -> tuple[int, int, str] | None:
    """(uid, gid, name) the worker should run as, or None to keep the grader's own.

    Only root can switch users, so elsewhere the setting is ignored (a TA's laptop, CI as a user).
    """
    name = user or os.environ.get(USER_ENV, "").strip()
    if not name or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return None
    import pwd
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise ValueError(f"{USER_ENV}={name!r}: no such user on this machine") from None
    if entry.pw_uid == 0:
        raise ValueError(f"{USER_ENV}={name!r} is root; the worker must run as an unprivileged user")
    return entry.pw_uid, entry.pw_gid, name


class Sandbox:
    """One student's worker process, restarted as needed. Use as a context manager."""

    def __init__(self, cells: list[dict], *, device: str = "cpu", import_torch: bool = False,
                 limits: Limits = Limits()):
        self.cells = cells
        self.device = device
        self.import_torch = import_torch
        self.limits = limits
        self.identity = worker_identity(limits.worker_user)  # before any temp dir: it may refuse
        self.skip: dict[int, str] = {}  # cell index -> why it was skipped at load
        self.cell_errors: list[dict] = []  # exceptions raised while loading cells
        self.defined: list[str] = []
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="lmgrade-scratch-"))
        self.sitedir = Path(tempfile.mkdtemp(prefix="lmgrade-site-"))
        os.symlink(PACKAGE_DIR, self.sitedir / "autograder")  # only the engine, not solutions/
        if self.identity:  # the worker's own scratch; the site dir stays root's, readable by all
            os.chown(self.scratch, self.identity[0], self.identity[1])
            os.chmod(self.sitedir, 0o755)

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
        shutil.rmtree(self.sitedir, ignore_errors=True)

    def _spawn(self) -> None:
        harden_this_process()
        limits, cuda, identity = self.limits, self.device.startswith("cuda"), self.identity
        python = limits.worker_python or sys.executable
        uid = identity[0] if identity else os.getuid()
        nproc = _task_count(uid) + limits.process_margin if uid != 0 and _HAVE_PROC else None
        netns = limits.isolate_network and os.geteuid() == 0 and _LIBC is not None
        confine = limits.confine and os.environ.get(LANDLOCK_ENV, "1") != "0"
        ruleset = _landlock_ruleset(self._readable(python), [self.scratch]) if confine else None

        def prepare_child() -> None:  # runs in the child before exec; the order matters
            if netns:  # needs root, so before dropping the user; a container may forbid it
                try:
                    _check(_LIBC.unshare(_CLONE_NEWNET))
                except OSError:
                    pass
            if not cuda:  # the CUDA runtime reserves far more address space than it uses
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if nproc is not None:
                resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
            if identity:
                os.setgroups([])
                os.setgid(identity[1])
                os.setuid(identity[0])
            if ruleset is not None:
                _landlock_restrict(ruleset)

        bootstrap = ("import sys; sys.path.insert(0, sys.argv[1]); "
                     "from autograder.worker import main; main(sys.argv[1:])")
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.scratch), "TMPDIR": str(self.scratch),
               "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        if cuda and "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [python, "-I", "-c", bootstrap, str(self.sitedir), str(to_worker_r), str(from_worker_w)],
                cwd=self.scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(to_worker_r, from_worker_w), start_new_session=True,
                preexec_fn=prepare_child)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
                os.close(fd)
            who = f" as user {identity[2]}, who must be able to run {python} and read {PACKAGE_DIR}" if identity else ""
            raise WorkerFailure("unavailable", f"the worker process could not start{who}: {exc}") from None
        finally:
            if ruleset is not None:
                os.close(ruleset)
        _LIVE_WORKERS.add(self.proc.pid)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.wfd, self.rfd = to_worker_w, from_worker_r
        fcntl.fcntl(self.wfd, fcntl.F_SETFL, fcntl.fcntl(self.wfd, fcntl.F_GETFL) | os.O_NONBLOCK)

    def _readable(self, python: str) -> list[Path]:
        """What the confined worker may read: system and Python directories and the engine, nothing
        of the course repository (solutions/, assignments/) or of other students' scratch dirs."""
        paths = [Path(p) for p in ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                                   "/proc", "/sys", "/nix/store")]
        paths += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
        paths += [Path(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
        exe = Path(python)
        if (exe.parent.parent / "pyvenv.cfg").exists():  # a virtual environment: its own root
            paths.append(exe.parent.parent)
        real = exe.resolve()
        paths.append(real.parent)
        if any((real.parent.parent / "lib").glob("python3*")):  # the interpreter's installation prefix
            paths.append(real.parent.parent)
        repo = PACKAGE_DIR.parent  # never a directory that holds the course's assignments and solutions
        if (repo / "assignments").is_dir() or (repo / "solutions").is_dir():
            paths = [p for p in paths if not repo.is_relative_to(p.resolve() if p.exists() else p)]
        return paths + [PACKAGE_DIR, self.sitedir]

    def _kill(self) -> None:
        if self.proc is None:
            return
        _LIVE_WORKERS.discard(self.proc.pid)
        kill_tree(self.proc.pid, spare=_LIVE_WORKERS)  # the worker and anything it started
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc = None

    def ensure_started(self) -> None:
        """Start a worker and load the graded cells, skipping any cell that kills the load."""
        while self.proc is None:
            if self.restarts > self.limits.max_restarts:
                raise WorkerFailure("unavailable", "the student's process was restarted too many times")
            self.restarts += 1
            self._spawn()
            current: list[int | None] = [None]
            cells = [c for c in self.cells if c["index"] not in self.skip]
            try:
                reply, reply_arrays = self._exchange(
                    {"op": "load", "cells": cells, "device": self.device, "import_torch": self.import_torch},
                    [], self.limits.load_timeout + (3 if self.import_torch else 0), current)
            except WorkerFailure as failure:
                self._kill()
                if current[0] is None:  # died before any student code ran: a grader problem
                    raise WorkerFailure("unavailable", f"the worker process could not start ({failure.detail})") from None
                self.skip[current[0]] = failure.kind if failure.kind != "died" else failure.detail
                continue
            try:  # the value is a wire tree like any reply; the worker may be hostile, so check its shape
                value = wire.decode(reply.get("value"), reply_arrays) if reply.get("event") == "done" else {}
            except wire.WireError:
                value = {}
            value = value if type(value) is dict else {}
            errors, defined = value.get("cell_errors"), value.get("defined")
            self.cell_errors = [e for e in errors if type(e) is dict and type(e.get("error")) is dict] \
                if type(errors) is list else []
            self.defined = [n for n in defined if type(n) is str] if type(defined) is list else []

    # ---- requests ------------------------------------------------------------------------
    def request(self, message: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        """Send one request; return the final reply. Raises WorkerFailure (worker then restarts)."""
        self.ensure_started()
        try:
            return self._exchange(message, arrays, timeout, None)
        except WorkerFailure:
            self._kill()
            raise

    def _exchange(self, message, arrays, timeout, progress):
        deadline = time.monotonic() + timeout
        self._write_all(wire.pack(message, arrays), deadline)
        while True:
            n_json, n_npz = self._header(deadline)
            body, blob = self._read_exact(n_json, deadline), self._read_exact(n_npz, deadline)
            try:
                reply, reply_arrays = wire.unpack(body, blob)
            except wire.WireError as exc:
                raise WorkerFailure("broken", str(exc)) from None
            if reply.get("event") == "progress":
                if progress is not None:
                    progress[0] = reply.get("cell")
                    deadline = time.monotonic() + timeout  # the load deadline is per cell
                continue
            return reply, reply_arrays

    def _header(self, deadline):
        try:
            return wire.header_lengths(self._read_exact(wire.HEADER_SIZE, deadline))
        except wire.WireError as exc:
            raise WorkerFailure("broken", str(exc)) from None

    def _write_all(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerFailure("timeout")
            _, ready, _ = select.select([], [self.wfd], [], left)
            if not ready:
                continue
            try:
                view = view[os.write(self.wfd, view):]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise WorkerFailure("died", self._death()) from None

    def _read_exact(self, n: int, deadline: float) -> bytes:
        chunks, left = [], n
        while left:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerFailure("timeout")
            ready, _, _ = select.select([self.rfd], [], [], min(remaining, 0.5))
            if not ready:
                if self.proc.poll() is not None:  # dead, but children it forked keep the pipe open
                    raise WorkerFailure("died", self._death())
                continue
            chunk = os.read(self.rfd, min(left, 1 << 20))
            if not chunk:
                raise WorkerFailure("died", self._death())
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _death(self) -> str:
        """Describe how the worker ended, in words a student can act on."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "it closed its connection to the grader"
        if code < 0:
            name = signal.Signals(-code).name
            why = {"SIGKILL": "killed (often: out of memory)", "SIGXCPU": "out of CPU time",
                   "SIGXFSZ": "it wrote a file larger than allowed", "SIGSEGV": "it crashed (segmentation fault)"}
            return f"the process was {why.get(name, 'stopped by ' + name)}"
        return f"the process exited with code {code} (sys.exit, os._exit or a crash)"


# ---- the grader's own process ------------------------------------------------------------------
_LIBC = None
if sys.platform.startswith("linux"):
    try:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    except OSError:
        _LIBC = None
_HAVE_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")
_CLONE_NEWNET = 0x40000000
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 4, 38, 36
_LIVE_WORKERS: set[int] = set()  # workers started by this process and not yet killed
_hardened = False


def _check(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def harden_this_process() -> None:
    """Make the trusted process a child subreaper and non-dumpable (Linux; idempotent).

    Subreaper: a student process that double-forks to leave the worker's session is re-parented
    here rather than to init, so `kill_tree` still finds it. Non-dumpable: code running as the
    same user cannot open /proc/<grader>/mem or /fd (read hidden data, write scores, forge replies).
    """
    global _hardened
    if _hardened or _LIBC is None:
        return
    _hardened = True
    for option, value in ((_PR_SET_CHILD_SUBREAPER, 1), (_PR_SET_DUMPABLE, 0)):
        _LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0),
                    ctypes.c_ulong(0))


# ---- finding and killing every process a worker started ---------------------------------------
def _proc_table() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (ppid, process group, session, threads) of every process, from /proc."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode("ascii", "replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[17]))
    return table


def _task_count(uid: int) -> int:
    """Threads of every process owned by `uid`: what RLIMIT_NPROC counts against."""
    total = 0
    for pid, (_, _, _, threads) in _proc_table().items():
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                total += threads
        except OSError:
            pass
    return total


def kill_tree(leader: int, spare=frozenset()) -> set[int]:
    """Stop, then kill, process `leader` and everything it started. Returns the pids caught.

    Members: the leader's process group and session, their descendants by parent pid, and orphans
    this (subreaper) process adopted that left our session, except the live workers in `spare`.
    Everything found is SIGSTOPped at once so that nothing forks while we look, and the search
    repeats until two rounds find nothing new; then all of it gets SIGKILL. A setsid() child is
    found through its parent, a double-forked one through adoption. Without /proc (macOS) this
    falls back to killing the process group.
    """
    if not _HAVE_PROC:
        try:
            os.killpg(leader, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return set()
    me, my_session = os.getpid(), os.getsid(0)
    caught: set[int] = set()
    calm, deadline = 0, time.monotonic() + 10
    while calm < 2 and time.monotonic() < deadline:
        table = _proc_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _, _, _) in table.items():
            children.setdefault(ppid, []).append(pid)
        found = {pid for pid, (ppid, pgrp, session, _) in table.items()
                 if leader in (pid, pgrp, session) or (ppid == me and session != my_session and pid not in spare)}
        found |= caught & table.keys()
        stack = list(found)
        while stack:
            for child in children.get(stack.pop(), ()):
                if child not in found:
                    found.add(child)
                    stack.append(child)
        found.discard(me)
        new = found - caught
        for pid in new:
            _signal(pid, signal.SIGSTOP)
        caught |= new
        calm = 0 if new else calm + 1
    for pid in caught:
        _signal(pid, signal.SIGKILL)
    _reap(caught - {leader})
    return caught


def kill_orphans(spare=frozenset()) -> set[int]:
    """Kill what was re-parented to this process from outside its session (e.g. the worker of a
    grader process that died), with all its descendants; `spare` lists children to leave alone."""
    if not _HAVE_PROC:
        return set()
    me, my_session = os.getpid(), os.getsid(0)
    caught: set[int] = set()
    for pid, (ppid, _, session, _) in _proc_table().items():
        if ppid == me and session != my_session and pid not in spare and pid not in caught:
            caught |= kill_tree(pid, spare=set(spare) | _LIVE_WORKERS)
            _reap({pid})
    return caught


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pids: set[int], seconds: float = 2.0) -> None:
    """Collect the zombies of killed processes that were (or become) our children."""
    pending, deadline = set(pids), time.monotonic() + seconds
    while pending and time.monotonic() < deadline:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours (yet): its parent may still be dying
                done = 0 if os.path.exists(f"/proc/{pid}") else pid
            if done:
                pending.discard(pid)
        if pending:
            time.sleep(0.005)


# ---- Landlock: unprivileged file, network and signal confinement (Linux >= 5.13) ---------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on every architecture
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ALL_V1, _FS_REFER, _FS_TRUNCATE = (1 << 13) - 1, 1 << 13, 1 << 14
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1
_landlock_abi_cache: int | None = None


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, disabled, not Linux)."""
    global _landlock_abi_cache
    if _landlock_abi_cache is None:
        abi = -1
        if _LIBC is not None:
            abi = _LIBC.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
        _landlock_abi_cache = max(int(abi), 0)
    return _landlock_abi_cache


def _landlock_ruleset(readable: list[Path], writable: list[Path]) -> int | None:
    """A ruleset fd: read+execute below `readable`, everything below `writable`, devices read/write;
    with ABI 4+ no TCP bind or connect, with ABI 6+ no signals or abstract sockets beyond the worker's
    own processes. None where Landlock is unavailable (the worker then runs without it)."""
    abi = landlock_abi()
    if abi < 1:
        return None
    fs = _FS_ALL_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)
    attr = _RulesetAttr(fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = _LIBC.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return None
    fd = int(fd)
    reading = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    devices = _FS_READ_FILE | _FS_WRITE_FILE | _FS_READ_DIR | (_FS_TRUNCATE if abi >= 3 else 0)
    rules = [(p, reading) for p in readable] + [(Path("/dev"), devices), (Path("/dev/shm"), fs)]
    rules += [(p, fs) for p in writable]
    try:
        for path, access in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                if not os.path.isdir(path):  # a file takes only file rights
                    access &= _FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
                rule = _PathBeneathAttr(access & fs, pfd)
                _check(_LIBC.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(1),
                                     ctypes.byref(rule), ctypes.c_uint32(0)))
            finally:
                os.close(pfd)
    except OSError:
        os.close(fd)
        return None
    return fd


def _landlock_restrict(ruleset: int) -> None:
    """In the child: no new privileges (required, and it also stops setuid binaries), then enforce."""
    _check(_LIBC.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)))
    _check(_LIBC.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)))
