"""The batch's grader processes: `GraderProcess` starts and talks to one, and `serve` is the
program it runs (`python -m autograder.grading.grader_process --serve CONFIG`), which grades one
submission at a time with `runner.grade`, each in its sandboxed worker.

Why a module of its own: it is the program every grader process runs, so its command line names
it and it loads only what grading needs, not the batch, its outputs or the shards.
"""
from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.authoring import assignments
from autograder.grading import results, runner
from autograder.grading.records import report_from_dict, report_to_dict
from autograder.grading.results import clean
from autograder.grading.runner import Report
from autograder.sandbox import capabilities
from autograder.sandbox.limits import Limits


@dataclass
class Outcome:
    """What one grading attempt produced: a report, or why there is none."""

    report: Report | None = None
    error: str = ""


class GraderProcess:
    """A long-lived `python -m autograder.grading.grader_process --serve` that grades one submission at a time.

    Jobs and replies are JSON lines; each job carries a fresh random token that its reply must
    echo, so a line written by anyone else (the grader is non-dumpable, so a worker cannot reach
    its pipes) would be ignored rather than believed.
    """

    def __init__(self, config: dict):
        # its sandboxes' scratch dirs go here, so that they are removed even if the grader is killed;
        # 0711: a worker running as another user reaches its own scratch dir but lists nothing
        self.tmp = Path(tempfile.mkdtemp(prefix="lmgrade-grader-"))
        os.chmod(self.tmp, 0o711)
        # its own session: a Ctrl-C at the terminal reaches only the batch, which stops graders itself
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.grading.grader_process", "--serve",
                                      json.dumps(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0,
                                     env=dict(os.environ, TMPDIR=str(self.tmp)), start_new_session=True)
        self.buffer = b""

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def grade(self, path: Path, questions: list[str] | None, timeout: float) -> Outcome:
        token = secrets.token_hex(16)
        try:
            self.proc.stdin.write((json.dumps({"token": token, "path": str(path), "questions": questions}) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return Outcome(error=self._died())
        deadline = time.monotonic() + timeout
        while True:
            line = self._line(deadline)
            if line is None:  # no reply: it ended, or it is still at work after the deadline
                if time.monotonic() >= deadline and self.alive:
                    self.stop()
                    return Outcome(error=f"grading took longer than {timeout:g} s and was stopped")
                return Outcome(error=self._died())
            try:
                reply = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if type(reply) is not dict or reply.get("token") != token:
                continue
            if reply.get("error"):
                return Outcome(error=clean(f"the grader failed: {reply['error']}")[:2000])
            try:  # the trusted boundary: every string cleaned before anything is written or printed
                return Outcome(report=results.sanitize(report_from_dict(reply["report"])))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                return Outcome(error=clean(f"the grader sent an unreadable report ({exc})")[:2000])

    def _line(self, deadline: float) -> bytes | None:
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                if not self.alive:
                    return None
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def _died(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the grading process stopped answering"
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        return f"the grading process {how} while grading this submission"

    def terminate(self) -> None:
        """Ask it to end (it kills its worker on the way out); `stop` waits for it."""
        if self.proc.poll() is None:
            try:
                self.proc.terminate()
            except OSError:
                pass

    def stop(self) -> None:
        """SIGTERM first, so that the grader kills its worker on the way out; then SIGKILL."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            except KeyboardInterrupt:  # a second Ctrl-C: no more patience
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)


def serve(config: dict) -> None:
    """The grader process: read jobs on stdin, grade, answer on the original stdout."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything else printed here (warnings, data preparation) goes to stderr
    sys.stdout = sys.stderr
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds `with Sandbox`: the worker dies too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the batch decides what a Ctrl-C means
    capabilities.harden_this_process()
    assignment = assignments.get(config["assignment"], Path(config["root"]))
    runner.one_torch_thread(assignment)
    limits = Limits(**config["limits"]) if config.get("limits") else None
    extra = {}
    if hasattr(runner, "reference_results") and assignment.reference_path.exists():
        try:  # the reference's cached results, read before any worker of any submission has run
            extra["reference_results"] = runner.reference_results(assignment)
        except Exception:  # noqa: BLE001 - each submission's grading reports it then
            import traceback
            traceback.print_exc()
    for line in sys.stdin:
        job = json.loads(line)
        reply: dict = {"token": job["token"]}
        try:
            report = runner.grade(job["path"], assignment, device=config["device"], limits=limits,
                                  questions=set(job["questions"]) if job.get("questions") else None, **extra)
            reply["report"] = report_to_dict(results.sanitize(report))
        except Exception as exc:  # noqa: BLE001 - reported for this submission; the batch goes on
            import traceback
            traceback.print_exc()
            reply["error"] = f"{type(exc).__name__}: {exc}"
        out.write(json.dumps(reply) + "\n")



def main(argv: list[str]) -> None:
    if len(argv) == 2 and argv[0] == "--serve":
        serve(json.loads(argv[1]))
    else:
        raise SystemExit("usage: lmgrade grade SUBMISSIONS... --out DIR (this module's --serve is internal)")


if __name__ == "__main__":
    main(sys.argv[1:])
