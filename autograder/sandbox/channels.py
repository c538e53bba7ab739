"""How bytes move between the grader and its worker, with every wait bounded by the grader's clock.

Why a file of its own: a worker that stops reading or writing must never hang the grader, so each
read and write waits at most until the clock's next look; POSIX uses two pipes and select(),
Windows (where select() cannot wait on pipes) the worker's stdin/stdout and a reader thread.
"""
from __future__ import annotations

import os
import queue
import select
import shutil
import subprocess
import sys
import threading

from autograder.sandbox.clock import Clock, WorkerFailure


class PipeChannel:
    """Two pipes, read and written with select() so that every wait honours the clock."""

    def __init__(self, wfd: int, rfd: int, proc: subprocess.Popen):
        self.wfd, self.rfd, self.proc = wfd, rfd, proc

    def write_all(self, data: bytes, clock: Clock, death) -> None:
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

    def read_exact(self, n: int, clock: Clock, death) -> bytes:
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


class ThreadChannel:
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

    def write_all(self, data: bytes, clock: Clock, death) -> None:
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

    def read_exact(self, n: int, clock: Clock, death) -> bytes:
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


def kill_portable(proc: subprocess.Popen) -> None:
    """Without /proc: the whole tree with taskkill on Windows, else the process itself."""
    if sys.platform == "win32" and shutil.which("taskkill"):
        subprocess.run(["taskkill", "/F", "/T", "/PID", str(proc.pid)], capture_output=True)
    try:
        proc.kill()
    except OSError:
        pass
