"""The trusted side of the worker: start it under limits, talk to it with deadlines, restart it.

Why: one hung or crashing function must cost only its own check. Every request has a deadline;
on a timeout or a dead worker the whole process group is killed and a fresh worker reloads the
submission (skipping any cell that killed it at load time) before the next check.
"""
from __future__ import annotations

import fcntl
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import wire

PACKAGE_DIR = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Limits:
    """Resource limits for the student's process (per worker) and default deadlines."""

    call_timeout: float = 20.0  # seconds of wall time for one request
    load_timeout: float = 30.0  # seconds for each graded cell to load
    memory_bytes: int = 3 << 30  # address space; CUDA needs more, so it is lifted there
    cpu_seconds: int = 1800  # CPU time of one worker over its whole life
    file_bytes: int = 64 << 20  # largest file the student's code may write
    max_restarts: int = 40  # after this many the remaining checks fail fast


class WorkerFailure(Exception):
    """The worker timed out, died, or sent something unreadable. `kind` says which."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind = kind  # 'timeout', 'died', 'broken', 'unavailable'
        self.detail = detail


class Sandbox:
    """One student's worker process, restarted as needed. Use as a context manager."""

    def __init__(self, cells: list[dict], *, device: str = "cpu", import_torch: bool = False,
                 limits: Limits = Limits()):
        self.cells = cells
        self.device = device
        self.import_torch = import_torch
        self.limits = limits
        self.skip: dict[int, str] = {}  # cell index -> why it was skipped at load
        self.cell_errors: list[dict] = []  # exceptions raised while loading cells
        self.defined: list[str] = []
        self.restarts = 0
        self.proc: subprocess.Popen | None = None
        self.scratch = Path(tempfile.mkdtemp(prefix="lmgrade-scratch-"))
        self.sitedir = Path(tempfile.mkdtemp(prefix="lmgrade-site-"))
        os.symlink(PACKAGE_DIR, self.sitedir / "autograder")  # only the engine, not solutions/

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
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        limits, cuda = self.limits, self.device.startswith("cuda")

        def apply_limits() -> None:  # runs in the child before exec
            if not cuda:  # the CUDA runtime reserves far more address space than it uses
                resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
            resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        bootstrap = ("import sys; sys.path.insert(0, sys.argv[1]); "
                     "from autograder.worker import main; main(sys.argv[1:])")
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(self.scratch), "TMPDIR": str(self.scratch),
               "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
        if cuda and "CUDA_VISIBLE_DEVICES" in os.environ:
            env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", bootstrap, str(self.sitedir), str(to_worker_r), str(from_worker_w)],
            cwd=self.scratch, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, pass_fds=(to_worker_r, from_worker_w), start_new_session=True,
            preexec_fn=apply_limits)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.wfd, self.rfd = to_worker_w, from_worker_r
        fcntl.fcntl(self.wfd, fcntl.F_SETFL, fcntl.fcntl(self.wfd, fcntl.F_GETFL) | os.O_NONBLOCK)

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the worker and anything it started
        except (ProcessLookupError, PermissionError):
            pass
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
