"""What a new worker starts with (interpreter flags, environment) and the steps it takes on itself,
in order, before it runs anything of the student's.

Why a file of its own: the same steps run in two places, and must never differ. A worker started
with exec runs them in the forked child before exec (`subprocess`'s preexec_fn, in the grader's
fork); a worker forked from the fork server (forkserver.py) runs them right after its fork, in the
server's process. The grader decides everything (`Plan`, plain values the server can receive
as JSON); the child only applies it. What each step gives is said in lifecycle.py's docstring.
"""
from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass

from autograder.sandbox.capabilities import CapDrop
from autograder.sandbox.landlock import (FS_EXECUTE, PathBeneathAttr, landlock_allow_beneath, landlock_fs_rights,
                                        landlock_restrict, proc_rule)
from autograder.sandbox.linux import LIBC, PR_SET_NO_NEW_PRIVS, check, resource
from autograder.sandbox.namespaces import (CLONE_NEWNET, CLONE_NEWNS, MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_REC,
                                           become, become_pid_one, expose, new_session_keyring, own_pid_namespace,
                                           own_uid, own_user_namespace, private_mount_namespace)

# Isolated like -I (no user site-packages, no script directory on sys.path) but without -E, so that
# the environment `worker_env` builds, which holds nothing else, applies: -I would ignore PYTHONHASHSEED
# and give every worker a new set order, and a submission that iterates a set of strings a new score.
WORKER_FLAGS = ("-s", "-P")


def worker_env(home: str, cuda: bool) -> dict:
    """The whole environment of a worker (and of the fork server, whose children get it again)."""
    # USER and LOGNAME: getpass.getuser() (torch's cache folders) asks them first; a worker's own uid has
    # no entry in /etc/passwd, where the lookup would fail
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "USER": "lmgrade-worker",
           "LOGNAME": "lmgrade-worker",
           "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    if sys.platform == "win32":  # Python needs these to start there
        env.update({k: os.environ[k] for k in ("SYSTEMROOT", "PATH") if k in os.environ},
                   TEMP=home, TMP=home, USERPROFILE=home)
    if cuda and "CUDA_VISIBLE_DEVICES" in os.environ:
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return env


@dataclass(frozen=True)
class Plan:
    """What one worker applies to itself, as the grader computed it."""

    scratch: str  # its scratch folder (a bounded tmpfs of its own where it gets a mount namespace)
    scratch_options: str  # that tmpfs's mount options
    root: bool  # the grader is root
    netns: bool  # as root: a fresh network namespace first (it needs root's rights)
    isolate_network: bool  # a fresh network namespace wherever its own user namespace allows one
    cgroup_procs: tuple  # the `cgroup.procs` files of its cgroups (cgroups.py), to join
    cpu_seconds: int
    file_bytes: int
    nproc: int | None  # RLIMIT_NPROC before its own user namespace, where the uid is not root
    process_margin: int  # RLIMIT_NPROC inside its own user namespace
    identity: tuple[int, int] | None  # (uid, gid) to become, as root with a worker user
    ids: tuple[int, int]  # the (uid, gid) it ends up with (with `own_uid`, the child's own instead)
    drop_caps: bool  # uid 0 stays: drop every capability
    landlock: bool  # a Landlock ruleset is handed over with the plan
    own_uid: bool = False  # as root without a worker user: become uid and gid WORKER_UID_BASE + its pid
    covers: tuple = ()  # as root switching uid: (folder, names) to expose in its mount namespace (`expose`)
    rlimits: tuple = ()  # (resource, soft, hard) of the grader: every limit reset before the worker's own
    pid_namespace: bool = True  # its own PID and IPC namespaces, itself as their PID 1, where the kernel allows

    @classmethod
    def from_json(cls, doc: dict) -> "Plan":
        doc = dict(doc)
        for key in ("identity", "ids"):
            doc[key] = tuple(doc[key]) if doc[key] is not None else None
        doc["covers"] = tuple((folder, tuple(names)) for folder, names in doc.get("covers", ()))
        doc["rlimits"] = tuple(tuple(limit) for limit in doc.get("rlimits", ()))
        doc["cgroup_procs"] = tuple(doc["cgroup_procs"])
        return cls(**doc)


class Prepared:
    """The C structures the steps fill in, made before the fork (a forked child of a threaded
    process should not allocate; in the fork server's child it does not matter)."""

    def __init__(self, plan: Plan):
        self.caps = CapDrop() if LIBC is not None else None
        self.scratch_rule = PathBeneathAttr(landlock_fs_rights() & ~FS_EXECUTE, -1) if plan.landlock else None
        self.proc_rule = proc_rule() if plan.landlock else None


def grader_rlimits() -> tuple:
    """(resource, soft, hard) of every rlimit this process has: what each new worker starts from, so
    that nothing a worker did to the fork server's limits reaches the next one."""
    if resource is None:
        return ()
    found = []
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        try:
            found.append((getattr(resource, name), *resource.getrlimit(getattr(resource, name))))
        except (OSError, ValueError):
            pass
    return tuple(found)


def confine(plan: Plan, ruleset: int | None, prepared: Prepared) -> None:
    """Apply `plan` to this process; the order matters. `ruleset` is the Landlock ruleset's fd.

    With `plan.pid_namespace` this process forks twice once the namespaces exist: the caller's process
    stays outside as the keeper, its child is the init (PID 1) of the new namespaces (neither returns,
    both give up the worker's privileges first), and the init's child, PID 2, mounts a /proc of its
    namespace and goes on as the worker (`namespaces.become_pid_one`)."""
    scratch = os.fsencode(plan.scratch)
    ids = (own_uid(),) * 2 if plan.own_uid else plan.ids
    identity = ids if plan.own_uid else plan.identity
    pid_namespace = False

    def own_proc_rule() -> None:  # the worker's own /proc (landlock.proc_rule)
        if ruleset is not None:
            landlock_allow_beneath(ruleset, b"/proc", prepared.proc_rule)

    def private_mounts() -> None:
        """Its own mount namespace (best effort, except the covers a worker of another uid needs): a
        private /dev/shm, and a scratch that is a bounded tmpfs no other worker sees; all vanish with it."""
        if plan.covers:  # without them a worker of another uid cannot run the interpreter: no best effort
            private_mount_namespace()
            expose(plan.covers)
        try:
            if not plan.covers:
                check(LIBC.unshare(CLONE_NEWNS))
            check(LIBC.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None))
            check(LIBC.mount(b"tmpfs", b"/dev/shm", b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC),
                             b"mode=1777,size=67108864"))
            check(LIBC.mount(b"tmpfs", scratch, b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV),
                             plan.scratch_options.encode()))
            if plan.own_uid:
                os.chown(scratch, *ids)
            os.chdir(scratch)
            if ruleset is not None:
                landlock_allow_beneath(ruleset, scratch, prepared.scratch_rule)
        except OSError:
            pass

    if plan.netns:  # needs root, so before dropping the user; a container may forbid it
        try:
            check(LIBC.unshare(CLONE_NEWNET))
        except OSError:
            pass
    if plan.root and LIBC is not None:
        private_mounts()
        if plan.own_uid:  # its scratch is its own also where no tmpfs could be mounted there
            os.chown(scratch, *ids)
    for procs in plan.cgroup_procs:  # its bounds and CPU count, before its namespaces (best effort)
        try:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"%d" % os.getpid())
            finally:
                os.close(fd)
        except OSError:
            pass
    if resource is not None:
        for limit, soft, hard in plan.rlimits:  # the grader's, whatever the fork server's became
            if resource.getrlimit(limit) != (soft, hard):  # raising one may need a right this root lacks:
                resource.setrlimit(limit, (soft, hard))  # then the worker fails to start and exec is used
        resource.setrlimit(resource.RLIMIT_CPU, (plan.cpu_seconds, plan.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (plan.file_bytes, plan.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if plan.nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (plan.nproc, plan.nproc))
    if plan.root and plan.pid_namespace and LIBC is not None:  # root's right, so before dropping the user,
        try:  # after joining its cgroups (their namespace's root); a container may forbid it
            own_pid_namespace()
            pid_namespace = True
        except OSError:
            pass
        if pid_namespace:  # the worker mounts its /proc with root's right; keeper and init drop it first
            become_pid_one((lambda: become(*identity)) if identity else prepared.caps.apply, own_proc_rule)
    if identity:
        become(identity[0], identity[1])
    if own_user_namespace(ids):  # its own process count and keyrings; the grader finds all its tasks
        if resource is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (plan.process_margin, plan.process_margin))
        if not plan.root:  # a user without root: the namespace gives the rights for the rest
            if plan.isolate_network:
                try:
                    check(LIBC.unshare(CLONE_NEWNET))
                except OSError:
                    pass
            private_mounts()
        if plan.pid_namespace and not pid_namespace:  # a user without root: the namespace gives the right
            try:
                own_pid_namespace()
                pid_namespace = True
            except OSError:
                pass
            if pid_namespace:  # the worker mounts its /proc; keeper and init keep no capability
                become_pid_one(prepared.caps.apply, own_proc_rule)
        if not plan.drop_caps and prepared.caps is not None:  # what a new user namespace grants, dropped
            prepared.caps.apply()
    if plan.drop_caps:
        prepared.caps.apply()
    new_session_keyring()
    if LIBC is not None:  # no setuid binary or file capability ever raises its privileges
        check(LIBC.prctl(ctypes.c_int(PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1), ctypes.c_ulong(0),
                         ctypes.c_ulong(0), ctypes.c_ulong(0)))
    if ruleset is not None:
        landlock_restrict(ruleset)
