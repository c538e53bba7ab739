"""The grader's clock: every deadline of a request, and the CPU time of the worker's whole process tree.

Why a file of its own: a deadline must be the grader's, never the worker's word, and in CPU time
so that a loaded machine or parallel grading never fails correct code; the clock is polled
every few hundredths of a second during every call, so the tree's CPU time must stay cheap.
`WorkerFailure` lives here because the clock is the lowest part that raises it (a timeout).
"""
from __future__ import annotations

import time

import psutil

from autograder.sandbox.linux import WALKS_TREES
from autograder.sandbox.cgroups import cgroup_cpu
from autograder.sandbox.namespaces import in_user_namespace
from autograder.sandbox.processes import GONE, children


class WorkerFailure(Exception):
    """The worker timed out, died, or sent something unreadable. `kind` says which."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(kind, detail)
        self.kind = kind  # 'timeout', 'died', 'broken', 'unavailable'
        self.detail = detail


class Clock:
    """Deadlines of one request, kept by the grader: CPU seconds of the worker's process tree
    (so a loaded machine or parallel grading never fails correct code), a wall-clock backstop (for
    code that sleeps or blocks), and an optional whole bound that nothing restarts."""

    def __init__(self, pid: int, cpu: float, wall: float, whole: float | None = None, userns: int | None = None,
                 cgroups=()):
        self.pid, self.userns, self.cgroups = pid, userns, tuple(cgroups)
        self.started = time.monotonic()
        self.whole_deadline = self.started + whole if whole is not None else None
        self._cpu_now = 0.0
        self._known: dict[int, psutil.Process] = {}  # the tree's processes, kept between looks
        self.restart(cpu, wall)

    def restart(self, cpu: float, wall: float) -> None:
        """A new budget (the next graded cell), never beyond the whole bound."""
        self.cpu_limit, self.wall_limit = cpu, wall
        self.cpu_base = self._cpu() if WALKS_TREES else 0.0
        self._cpu_now = self.cpu_base
        now = self._last_check = time.monotonic()
        self.wall_deadline = now + (wall if WALKS_TREES else cpu)  # where no tree is walked only wall time is known
        if self.whole_deadline is not None:
            self.wall_deadline = min(self.wall_deadline, self.whole_deadline)

    def left(self) -> float:
        """Seconds to wait before looking again (> 0), or raise WorkerFailure('timeout')."""
        now = time.monotonic()
        if now >= self.wall_deadline:
            if self.whole_deadline is not None and now >= self.whole_deadline:
                raise WorkerFailure("timeout", f"loading all graded cells took over {self.whole_deadline - self.started:g} s")
            if not WALKS_TREES:
                raise WorkerFailure("timeout")
            raise WorkerFailure("timeout", f"it ran {self.wall_limit:g} s of wall-clock time while using "
                                f"{self._cpu_now - self.cpu_base:.1f} s of CPU time: sleeping, or waiting for something?")
        if WALKS_TREES and now - self._last_check >= 0.05:
            self._last_check = now
            self._cpu_now = max(self._cpu_now, self._cpu())
            if self._cpu_now - self.cpu_base > self.cpu_limit:
                raise WorkerFailure("timeout", f"it used {self._cpu_now - self.cpu_base:.1f} s of CPU time")
        return max(min(self.wall_deadline - now, 0.1), 0.001)

    def _cpu(self) -> float:
        """The worker's CPU seconds so far: its cgroups' count where it has one (every process that ever
        ran there, however it hid or ended), never less than the walk of its process tree. Where a cgroup
        counts, the walk leaves out the search of its user namespace: that scans every process on the
        machine (about 0.5 CPU s of the grader's over a grading) for what the cgroup counts already."""
        counted = cgroup_cpu(self.cgroups) if self.cgroups else None
        walked = tree_cpu(self.pid, self.userns if counted is None else None, self._known)
        return walked if counted is None else max(walked, counted)


def tree_cpu(leader: int, userns: int | None = None, known: dict[int, psutil.Process] | None = None) -> float:
    """CPU seconds (user + system) of `leader` and its descendants, living and reaped, and of every
    other process in the worker's own user namespace (orphans that left with setsid and a double fork).

    `known` keeps psutil's Process objects from one look to the next (a caller that looks often
    saves making them again); what is no longer in the tree is dropped from it. A process that
    ended meanwhile, a zombie or one that will not say counts what psutil can still read, or nothing.
    """
    known = {} if known is None else known
    total, seen, stack = 0.0, set(), [leader] + (in_user_namespace(userns) if userns else [])
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            proc = known.get(pid)
            if proc is None:
                proc = known[pid] = psutil.Process(pid)
            times = proc.cpu_times()
        except GONE:
            known.pop(pid, None)
            continue
        total += times.user + times.system + times.children_user + times.children_system
        stack += children(pid)
    for pid in known.keys() - seen:
        del known[pid]
    return total
