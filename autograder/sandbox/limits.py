"""What a worker may use and who it runs as: its resource limits and deadlines (`Limits`), the
user it runs as, and which confinement this machine gives (`confinement()`), which a batch requires.

Why a file of its own: the command line, the batch and Gradescope's setup ask these questions
without starting a worker; the answers depend on the platform, the settings in the environment
(`USER_ENV`, `LANDLOCK_ENV`) and the kernel, never on a running worker.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass

from autograder.sandbox.landlock import landlock_abi
from autograder.sandbox.linux import WALKS_TREES, fcntl, resource

OWN_UID_PROBE = (1 << 30) - 1  # a uid no worker gets (they are 2**30 + pid): the probe of a root batch's workers
USER_ENV = "LMGRADE_WORKER_USER"  # run the worker as this user when the grader is root
LANDLOCK_ENV = "LMGRADE_LANDLOCK"  # "0" turns Landlock off (troubleshooting a driver that needs more)
PORTABLE = sys.platform == "win32" or fcntl is None  # no pass_fds / preexec_fn / select on pipes


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


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def landlock_on(limits: Limits) -> bool:
    return limits.confine and os.environ.get(LANDLOCK_ENV, "1") != "0" and landlock_abi() >= 1


_runs_python: dict[tuple[str, int], bool] = {}


def fallback_identity(limits: Limits, python: str) -> tuple[int, int, str] | None:
    """As root with no worker user named and no Landlock: `nobody`, if it can run the interpreter.

    Without Landlock a capability-less uid 0 can still write every file root owns; `nobody`
    cannot. `LMGRADE_WORKER_USER=""` (set, empty) keeps root's uid on purpose (local tests).
    """
    if not is_root() or limits.worker_user or USER_ENV in os.environ or landlock_on(limits):
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


# what a forked worker imports after it has become another user (its interpreter is loaded already):
# the standard library the worker and the checks use, and numpy; torch's files are read, not imported
_PROBE = ("import ast, collections, dataclasses, functools, inspect, io, itertools, json, linecache, math, random, re, "
          "struct, tokenize, traceback, types, typing, zipfile, zlib, numpy, importlib.util, os\n"
          "spec = importlib.util.find_spec('torch')\n"
          "if spec is not None and spec.origin:\n"
          "    open(spec.origin, 'rb').read(1)\n"
          "    [os.stat(os.path.join(os.path.dirname(spec.origin), 'lib', n)) for n in "
          "os.listdir(os.path.join(os.path.dirname(spec.origin), 'lib'))]\n")
_proven: dict[tuple, str | None] = {}


def prove_worker_runs(python: str, uid: int, gid: int, who: str) -> None:
    """As root, before the first worker of another uid: prove that such a worker can run, or raise
    ValueError naming what it could not read and what to change.

    Why: a worker forked from the fork server has its interpreter loaded already and fails only later,
    at the first module it imports (`zipfile`), and every check would then blame the student. The proof
    runs `python` as `uid` with the same view of the file system a worker gets (`namespaces.expose`
    over folders closed to it) and imports what a forked worker imports later."""
    from autograder.sandbox.files import covers_for, worker_trees
    from autograder.sandbox.namespaces import become, expose, private_mount_namespace

    key = (python, uid, gid)
    if key not in _proven:
        covers, problems = covers_for(worker_trees(python), uid, {gid})
        why = None
        if problems:
            why = f"it cannot read {problems[0]}"
        else:
            def preexec() -> None:
                if covers:
                    private_mount_namespace()
                    expose(covers)
                become(uid, gid)
            try:
                probe = subprocess.run([python, "-s", "-P", "-c", _PROBE], preexec_fn=preexec, cwd="/",
                                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, capture_output=True,
                                       text=True, timeout=120)
                if probe.returncode != 0:
                    lines = (probe.stderr or "").strip().splitlines()
                    why = f"{python} failed: {lines[-1] if lines else f'exit code {probe.returncode}'}"
            except (OSError, subprocess.SubprocessError) as exc:
                why = f"{python} could not be started: {exc}"
        _proven[key] = why
    if _proven[key] is not None:
        raise ValueError(
            f"Refusing to grade: the worker ({who}) cannot run the grader's Python: {_proven[key]}. "
            f"Make that path readable by others (chmod o+rX on it and the folders above it), or build the "
            f"venv from a Python installed where every user can read it (e.g. /usr/local or /opt)"
            + (f", or set {USER_ENV} to a user who can read it" if who.startswith("user ") else "") + ".")


def confinement(limits: Limits | None = None) -> str:
    """How student code is confined here: "landlock+worker-user", "landlock", "worker-user" or "none".

    "none" means the worker can read whatever the grader's user can (reference, hidden checks,
    held-out text, caches) and write its files. Raises ValueError for a misconfigured worker user.
    """
    limits = limits or Limits()
    identity = worker_identity(limits.worker_user)
    python = limits.worker_python or sys.executable
    if identity is None and not PORTABLE:
        identity = fallback_identity(limits, python)
    if identity and not PORTABLE:  # prove that user can run the worker (a root batch's own uids: lifecycle.py)
        prove_worker_runs(python, identity[0], identity[1], f"user {identity[2]}")
    parts = (["landlock"] if not PORTABLE and landlock_on(limits) else []) + (["worker-user"] if identity else [])
    return "+".join(parts) or "none"


def require_confinement(limits: Limits | None = None) -> str:
    """The confinement level, or `Unconfined` with the reason and the way out (for batches); a
    ValueError, before anything is graded, where the worker's uid could not run the worker."""
    level = confinement(limits)
    if is_root() and not PORTABLE and "worker-user" not in level and hasattr(os, "setresuid"):
        prove_worker_runs((limits or Limits()).worker_python or sys.executable, OWN_UID_PROBE, OWN_UID_PROBE,
                          "a uid of its own")  # a root batch's workers: none runs as uid 0
    if level == "none":
        why = ("Landlock is turned off" if os.environ.get(LANDLOCK_ENV, "1") == "0" or (limits and not limits.confine)
               else "this system has no Landlock (Linux 5.13 or newer)")
        root = (" and student code would run as root's uid (capabilities dropped, but it could still write root's files)"
                if is_root() else "")
        raise Unconfined(
            f"Refusing to grade: {why}, and no separate worker user is set (as root, {USER_ENV}=<user>){root}. "
            "Student code could then read the reference solutions, hidden checks, held-out test text and the "
            "grader's caches, and change files of the user running the grader. Grade on Linux 5.13+ or as root "
            f"with {USER_ENV} set; or pass --allow-unconfined if you trust every submission.")
    return level


_warned: set[str] = set()


def say_once(key: str, text: str) -> None:
    """One line on stderr per process, for a limit this platform cannot apply."""
    if key not in _warned:
        _warned.add(key)
        print(f"lmgrade: {text}", file=sys.stderr)


def missing_limits() -> list[str]:
    """What this platform cannot do for the worker (empty on Linux)."""
    missing = []
    if PORTABLE:
        missing.append("process isolation (own session, no inherited files)")
    if resource is None:
        missing.append("memory, CPU and file-size limits")
    if not WALKS_TREES:
        missing.append("CPU-time deadlines (wall-clock time is used)")
    return missing
