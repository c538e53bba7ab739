"""What keeps workers apart from each other (Linux): a uid of each worker's own (as root), user, PID
and IPC namespaces of its own, an empty session keyring; and finding every process in a worker's user
namespace (its cgroups: cgroups.py).

Why a file of its own: two students' workers run side by side in a batch, often as the same uid;
the kernel keeps keyrings and the RLIMIT_NPROC count per user namespace, and every process a
worker starts (an orphan that left with setsid included) carries its namespace, so the grader
counts its CPU time and kills it by that. The mount and network namespace flags the worker's
start unshares are here too.
"""
from __future__ import annotations

import ctypes
import os
import signal
import stat

from autograder.sandbox.linux import LIBC, PR_SET_DUMPABLE, check

CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC = 0x40000000, 0x00020000, 0x20000000, 0x08000000
CLONE_NEWUTS, CLONE_NEWCGROUP = 0x04000000, 0x02000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 12, 1 << 14, 1 << 18
# A root batch without a worker user gives each worker the uid BASE + its own pid: live pids are unique, so
# no two live workers share a uid, and none is 0 (prlimit, setpriority, ioprio, signals, /proc: closed by ids).
WORKER_UID_BASE = 1 << 30
_CLONE_NEWUSER = 0x10000000
_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 280, "s390x": 280}.get(os.uname().machine
                                                                                            if hasattr(os, "uname") else "")
_KEYCTL_JOIN_SESSION_KEYRING = 1
_PR_SET_PDEATHSIG = 1


def own_user_namespace(ids: tuple[int, int]) -> bool:
    """In the child before exec: a new user namespace in which it keeps its own uid and gid (best effort).

    Why: the kernel keeps user keyrings and the RLIMIT_NPROC count per user namespace and uid, so a
    worker gets keyrings no other worker or root's shell can see and a process limit of its own,
    even as uid 0 (root's own count is exempt from RLIMIT_NPROC); and every process it starts, an
    orphan that left with setsid included, carries the namespace, so the grader counts and kills by it.
    """
    if LIBC is None:
        return False
    try:
        check(LIBC.unshare(_CLONE_NEWUSER))
    except OSError:
        return False  # user namespaces disabled here: one identity per worker user, said in security.md
    # after setuid the process is not dumpable and its /proc files are root's; exec resets this anyway
    LIBC.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
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


def own_uid() -> int:
    """In the child, as root: the uid (and gid) of this worker alone (see WORKER_UID_BASE)."""
    return WORKER_UID_BASE + os.getpid()


def become(uid: int, gid: int) -> None:
    """In the child, as root: real, effective and saved ids all `uid`/`gid`, no supplementary groups;
    every capability of uid 0 goes with it."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)


def private_mount_namespace() -> None:
    """A mount namespace of its own whose mounts never propagate back to the machine's."""
    check(LIBC.unshare(CLONE_NEWNS))
    check(LIBC.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None))


def expose(covers) -> None:
    """In the child, as root, in its own mount namespace: make the trees a worker of another uid must read
    reachable without showing anything else. Each `(folder, names)` is a folder others cannot traverse
    (root's home, mode 0700, holding the interpreter): it is covered by an empty tmpfs (mode 0755) and only
    `names` (its children on the way to what the worker reads) are bound back from descriptors taken
    before covering. Everything else in the folder stays hidden; the covers vanish with the worker."""
    for folder, names in covers:
        kept = [(name, os.open(os.path.join(folder, name), os.O_PATH | os.O_CLOEXEC)) for name in names]
        check(LIBC.mount(b"tmpfs", os.fsencode(folder), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                         b"mode=0755,size=1m,nr_inodes=1024"))
        for name, fd in kept:
            target = os.path.join(folder, name)
            if stat.S_ISDIR(os.fstat(fd).st_mode):
                os.mkdir(target, 0o755)
            else:
                os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
            check(LIBC.mount(b"/proc/self/fd/%d" % fd, os.fsencode(target), None, ctypes.c_ulong(MS_BIND | MS_REC), None))
            os.close(fd)


def own_pid_namespace() -> None:
    """In the child (root, or holding its own user namespace's capabilities): new PID and IPC namespaces.
    The next child it forks is their PID 1: when that process dies every process in them dies, however
    it detached (setsid, a double fork, a nested user namespace, clone3), and System V objects and POSIX
    message queues vanish with the IPC namespace. A UTS namespace comes with them (its host name is its
    own), and a cgroup namespace whose root is the cgroup it joined (it sees no other path)."""
    check(LIBC.unshare(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP))


def become_pid_one(outside=None, proc_mounted=None) -> None:
    """After `own_pid_namespace`: fork twice, and return in the worker; never returns elsewhere.
    `outside()` runs in the keeper and the init before they wait (what they give up: the worker's uid);
    `proc_mounted()` in the worker once it has a /proc of its own (`own_proc`: Landlock's rule for it).

    This process stays outside the new PID namespace as the keeper, the process the grader knows (it
    started it); its child is the namespace's PID 1, a tiny init that reaps every orphan; the init's child,
    PID 2, returns and becomes the worker (a PID 1 would ignore the signals it sends itself, SIGKILL
    included). When the worker ends, the init ends and the kernel kills everything left in the namespace,
    however it detached; the init tells the keeper how the worker ended over a pipe and the keeper ends
    the same way, so the grader reads the worker's fate from the pid it knows. Neither holds any other
    descriptor (the grader sees the worker's pipes close when it dies), both ignore signals, the init dies
    with the keeper (the grader kills the keeper) and nothing inside can name the keeper."""
    told_r, told_w = os.pipe()
    init = os.fork()
    if init == 0:
        _die_with_parent()
        worker = os.fork()
        if worker == 0:
            _die_with_parent()
            os.close(told_r)
            os.close(told_w)
            os.setsid()  # a session of its own, as before, inside its namespace
            if own_proc() and proc_mounted is not None:
                proc_mounted()
            return
        if outside is not None:
            outside()
        _wait_for(worker, told_w, reap_all=True)
    if outside is not None:
        outside()
    _wait_for(init, told_r, reap_all=False)


def own_proc() -> bool:
    """In the worker (PID 2 of its namespace): a /proc of its own PID namespace (best effort).

    Why: under the machine's /proc, /proc/<getpid()> is another process; the NVIDIA driver reads it
    and fails its start (cudaGetDeviceCount: "Error 304"), and every other process on the machine,
    classmates' workers included, would be listed. A new mount namespace first, so that the mount
    needs only the rights this process holds (its own user namespace's, or root's before the drop);
    a container that masks parts of /proc refuses it, and the machine's /proc stays (returns False)."""
    try:
        check(LIBC.unshare(CLONE_NEWNS))
        check(LIBC.mount(b"proc", b"/proc", b"proc", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None))
    except OSError:
        return False
    return True


def _die_with_parent() -> None:
    LIBC.prctl(ctypes.c_int(_PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
               ctypes.c_ulong(0), ctypes.c_ulong(0))


def _wait_for(child: int, told: int, reap_all: bool) -> None:
    """The init (`reap_all`: it reaps every orphan too; it writes the worker's wait status to `told`) or the
    keeper (it reads that status from `told`): wait for `child`, then end as the worker ended."""
    try:
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        os.closerange(3, told)
        os.closerange(told + 1, 1 << 20)
        status = None
        while status is None:
            try:
                pid, status_now = os.waitpid(-1 if reap_all else child, 0)
            except ChildProcessError:
                break
            if pid == child:
                status = status_now
        if reap_all:
            os.write(told, b"%d" % (status if status is not None else 1 << 8))
            os._exit(0)
        said = os.read(told, 32)
        status = int(said) if said.isdigit() else status if status is not None else 1 << 8
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught or blocked anyway
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
    finally:
        os._exit(1)


def new_session_keyring() -> None:
    """In the child before exec: an empty anonymous session keyring, not the grader's (best effort)."""
    if LIBC is not None and _KEYCTL is not None:
        LIBC.syscall(ctypes.c_long(_KEYCTL), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING), None)


def user_namespace(pid: int) -> int | None:
    """The inode of `pid`'s user namespace (None where /proc cannot tell).

    Linux only: psutil has no call for a process's namespaces; elsewhere (no /proc) always None."""
    try:
        return os.stat(f"/proc/{pid}/ns/user").st_ino
    except OSError:
        return None


def worker_user_namespace(keeper: int) -> int | None:
    """The user namespace of a worker whose process (or keeper) is `keeper`, None if it has none of its own.

    As root the keeper and the init stay outside it (they fork before the worker makes it), so it is
    that of the first descendant whose namespace is not the grader's; until the worker has made it, None."""
    import psutil  # the grader's side only
    mine = user_namespace(os.getpid())
    try:
        family = [keeper] + [p.pid for p in psutil.Process(keeper).children(recursive=True)]
    except psutil.Error:
        family = [keeper]
    return next((ns for pid in family if (ns := user_namespace(pid)) not in (None, mine)), None)


def in_user_namespace(userns: int) -> list[int]:
    """Every process in that user namespace (Linux only, see `user_namespace`; elsewhere none)."""
    import psutil  # the grader's side only: a worker imports this file to confine itself

    return [pid for pid in psutil.pids() if user_namespace(pid) == userns]
