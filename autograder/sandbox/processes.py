"""Finding and killing every process a worker started, however it hid (a new session, a double fork,
a process group of its own), and nothing else: not the grader, not another student's worker.

Why a file of its own: a timeout or a dead worker must not leave a busy loop or a fork bomb
behind to slow every later submission; the walk is shared by the worker's restart (`kill_tree`),
a batch cleaning up after a dead grader process (`kill_orphans`) and the grader's clock
(`children`). The process table, CPU times and thread counts come from psutil, so the code is
the same on Linux and macOS; the Linux-only reads left are marked: the user namespace of a process
(namespaces.py) and the fast path of `children`. Trees are walked, and CPU-time deadlines kept,
where psutil reads other processes (`WALKS_TREES`: Linux with /proc, macOS); elsewhere (Windows)
a worker is killed by its process group and deadlines are wall time.
"""
from __future__ import annotations

import os
import signal
import time

import psutil

from autograder.sandbox.linux import HAVE_PROC, WALKS_TREES
from autograder.sandbox.namespaces import in_user_namespace

LIVE_WORKERS: set[int] = set()  # workers started by this process and not yet killed
GONE = (psutil.NoSuchProcess, psutil.AccessDenied)  # a process that ended (a ZombieProcess too) or hides
_PROC_CHILDREN = HAVE_PROC and os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def alive(pid: int) -> bool:
    """Whether a process of this pid exists (another user's counts). psutil's, not `os.kill(pid, 0)`:
    on Windows signal 0 is CTRL_C_EVENT, sent to that process group."""
    return psutil.pid_exists(pid)


def process_table() -> dict[int, tuple[int, int | None, int | None]]:
    """pid -> (parent, process group, session) of every process; None where the system will not say
    (macOS may refuse the session of a process in another one). Zombies are included."""
    table = {}
    for proc in psutil.process_iter():
        pid = proc.pid
        try:
            table[pid] = (proc.ppid(), _or_none(os.getpgid, pid), _or_none(os.getsid, pid))
        except GONE + (ProcessLookupError,):  # gone meanwhile
            continue
    return table


def _or_none(call, pid: int) -> int | None:
    try:
        return call(pid)
    except PermissionError:
        return None


def children(pid: int) -> list[int]:
    """Live children of `pid`.

    On Linux from /proc/<pid>/task/*/children: a few small reads, in the clock's hot path. psutil
    has no such call (its `Process.children()` reads the stat file of every process on the
    machine, several times slower); it gives the answer elsewhere, or where the kernel lacks
    those files."""
    if not _PROC_CHILDREN:
        return [child for child, (ppid, _, _) in process_table().items() if ppid == pid]
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


def task_count(uid: int) -> int:
    """Threads of every process whose real uid is `uid`: what RLIMIT_NPROC counts against."""
    total = 0
    for proc in psutil.process_iter():
        try:
            with proc.oneshot():  # both from one read of /proc/<pid>/status on Linux
                if proc.uids().real == uid:
                    total += proc.num_threads()
        except GONE:
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
    found through its parent, a double-forked one through adoption. Where psutil cannot (Windows) this
    falls back to killing the process group.
    """
    if not WALKS_TREES:
        try:
            os.killpg(leader, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return set()
    me, my_session = os.getpid(), os.getsid(0)
    caught: set[int] = set()
    calm, deadline = 0, time.monotonic() + 10
    while calm < 2 and time.monotonic() < deadline:
        table = process_table()
        kids: dict[int, list[int]] = {}
        for pid, (ppid, _, _) in table.items():
            kids.setdefault(ppid, []).append(pid)
        found = {pid for pid, (ppid, group, session) in table.items()
                 if leader in (pid, group, session)
                 or (userns is None and ppid == me and session != my_session and pid not in spare)}
        if userns is not None:
            found |= set(in_user_namespace(userns))
        found |= caught & table.keys()
        stack = list(found)
        while stack:
            for child in kids.get(stack.pop(), ()):
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
    if not WALKS_TREES:
        return set()
    me, my_session = os.getpid(), os.getsid(0)
    caught: set[int] = set()
    for pid, (ppid, _, session) in process_table().items():
        if ppid == me and session != my_session and pid not in spare and pid not in caught:
            caught |= kill_tree(pid, spare=set(spare) | LIVE_WORKERS)
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
                done = 0 if psutil.pid_exists(pid) else pid
            if done:
                pending.discard(pid)
        if pending:
            time.sleep(0.005)
