"""Each worker's cgroup v2 (issue 29): made below the grader's own cgroup, however the grader got there.

A grader alone in a cgroup that offers controllers moves to a leaf and hands them on; a grader that
shares its cgroup with someone else (a shell in its session scope) moves nobody and still counts and
kills its workers by cgroup; an ordinary user whose cgroup was delegated to them (as `systemd-run
--user --scope -p Delegate=yes` does: the folder and its process files are the user's) gets worker
cgroups too. Each test runs a real grader process placed in a cgroup of its own, and a worker that
leaves an orphan behind (setsid, a double fork): it must die with its worker, and nothing is left.
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from autograder.sandbox import cgroups
from tests.helpers import v2_mount

GRADER = textwrap.dedent(r'''
    import json, os, sys, time
    as_user = sys.argv[2]
    if as_user:  # an ordinary user whose cgroup was delegated to them: root only put us there
        uid, gid = map(int, as_user.split(":"))
        os.setgroups([]); os.setgid(gid); os.setuid(uid)
    sys.path.insert(0, sys.argv[1])
    from autograder.checking.remote import Student
    from autograder.sandbox.cgroups import cgroup_cpu
    from autograder.sandbox.lifecycle import Sandbox
    code = """
    import os, time

    def orphan():
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while True:
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(0.2)
        return int(open("/proc/self/status").read().split("NSpid:")[1].split()[0])  # this worker, as the grader sees it

    def escape(base):  # leave its cgroup for the grader's, or make one beside it: both must fail
        done = []
        try:
            with open(base + "/cgroup.procs", "w") as f:
                f.write(str(os.getpid()))
            done.append("moved")
        except OSError:
            pass
        try:
            os.mkdir(base + "/escaped")
            done.append("mkdir")
        except OSError:
            pass
        return done

    def where():
        return open("/proc/self/cgroup").read().strip().splitlines()[-1]

    def burn(seconds):
        start = time.process_time()
        while time.process_time() - start < seconds:
            pass
        return seconds
    """
    sandbox = Sandbox([{"index": 0, "number": 1, "source": code}])
    student = Student(sandbox, timeout=10)
    student.orphan()
    student.burn(0.3)
    worker_sees = student.where()
    escaped = student.escape(sys.argv[3])
    v2 = [g for g in sandbox.cgroups if (g / "cgroup.kill").exists()]
    seen = {"grader": open("/proc/self/cgroup").read().strip().splitlines()[-1].split(":", 2)[2],
            "pid": os.getpid(), "worker_sees": worker_sees, "escaped": escaped, "groups": [str(g) for g in v2], "cpu": cgroup_cpu(v2),
            "members": sorted(int(p) for g in v2 for p in (g / "cgroup.procs").read_text().split())}
    sandbox.close()
    seen["alive_after"] = [p for p in seen["members"] if os.path.exists(f"/proc/{p}")]
    seen["groups_after"] = [g for g in seen["groups"] if os.path.exists(g)]
    print(json.dumps(seen))
''')


FAILED_START = textwrap.dedent(r'''
    import json, os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from autograder.checking.remote import Student, StudentCrash
    from autograder.sandbox import cgroups, forkserver, lifecycle

    def refuse(*args):  # the worker's confinement fails in the child: no worker starts
        raise OSError("refused by the test")

    lifecycle.confine, forkserver.server = refuse, lambda *args: None
    sandbox = lifecycle.Sandbox([{"index": 0, "number": 1, "source": "def ok():\n    return 1\n"}])
    try:
        Student(sandbox, timeout=10).ok()
        crashed = ""
    except StudentCrash as exc:
        crashed = str(exc)
    mine = f"{cgroups.WORKER_PREFIX}{os.getpid()}-"
    left = [str(p) for p in Path(sys.argv[3]).rglob(mine + "*")]  # while this grader still lives
    sandbox.close()
    print(json.dumps({"crashed": crashed, "left": left}))
''')


@pytest.fixture
def grader_cgroup():
    """A fresh non-root v2 cgroup for a grader, offering at least one controller where the machine has
    any (the root's are handed on for the test and taken back after, if the test had to)."""
    if os.geteuid() != 0:
        pytest.skip("making cgroups needs root")
    mount = v2_mount()
    if mount is None or not (mount / "cgroup.procs").exists():
        pytest.skip("no cgroup v2 here")
    enabled = []
    if not cgroups.read_words(mount / "cgroup.subtree_control"):
        for controller in cgroups.read_words(mount / "cgroup.controllers"):
            try:
                (mount / "cgroup.subtree_control").write_text(f"+{controller}")
                enabled.append(controller)
                break
            except OSError:
                pass
    try:
        base = Path(tempfile.mkdtemp(prefix="lmgrade-test-grader-", dir=mount))
    except OSError as exc:  # a read-only cgroup file system (an unprivileged container)
        pytest.skip(f"no cgroup can be made here: {exc}")
    try:
        yield base
    finally:
        cgroups.remove_cgroups([base])
        for controller in enabled:
            try:
                (mount / "cgroup.subtree_control").write_text(f"-{controller}")
            except OSError:
                pass


def run_grader(base: Path, python: str = sys.executable, as_user: str = "", script: str = GRADER) -> dict:
    def join() -> None:
        (base / "cgroup.procs").write_text(str(os.getpid()))

    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([python, "-c", script, repo, as_user, str(base)], preexec_fn=join, capture_output=True, text=True,
                          timeout=240, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def assert_counted_killed_and_gone(seen: dict, base: Path) -> None:
    assert seen["groups"] and all(Path(g).parent == base for g in seen["groups"]), seen
    assert seen["worker_sees"] == "0::/", seen  # its cgroup namespace is rooted at its own cgroup
    assert seen["escaped"] == [], seen  # it can neither leave its cgroup nor make one
    assert len(seen["members"]) >= 2, seen  # the worker's keeper, init and worker, and the orphan, all in it
    assert seen["cpu"] is not None and seen["cpu"] >= 0.3, seen  # counted by the cgroup
    assert seen["alive_after"] == [] and seen["groups_after"] == [], seen


def test_a_grader_alone_in_its_cgroup_moves_to_a_leaf_and_hands_on_the_controllers(grader_cgroup):
    offered = cgroups.read_words(grader_cgroup / "cgroup.controllers")
    seen = run_grader(grader_cgroup)
    assert_counted_killed_and_gone(seen, grader_cgroup)
    if not offered:
        pytest.skip("this machine's cgroup v2 has no controller to hand on (the rest was checked)")
    leaf = grader_cgroup / f"{cgroups.GRADER_LEAF_PREFIX}{seen['pid']}"
    assert seen["grader"] == "/" + str(leaf.relative_to(v2_mount())), seen
    assert set(offered) <= set(cgroups.read_words(grader_cgroup / "cgroup.subtree_control"))


def test_a_grader_sharing_its_cgroup_moves_nobody_and_still_counts_and_kills(grader_cgroup):
    neighbour = subprocess.Popen(["sleep", "600"], preexec_fn=lambda: (grader_cgroup / "cgroup.procs").write_text(
        str(os.getpid())))
    try:
        seen = run_grader(grader_cgroup)
        assert_counted_killed_and_gone(seen, grader_cgroup)
        assert seen["grader"] == "/" + str(grader_cgroup.relative_to(v2_mount())), seen  # not moved
        assert neighbour.poll() is None and str(neighbour.pid) in (grader_cgroup / "cgroup.procs").read_text().split()
        assert cgroups.read_words(grader_cgroup / "cgroup.subtree_control") == []
    finally:
        neighbour.kill()
        neighbour.wait()


def test_a_users_delegated_cgroup_gets_worker_cgroups_too(grader_cgroup, nobody_python):
    import pwd
    nobody = pwd.getpwnam("nobody")
    for path in (grader_cgroup, *(grader_cgroup / name for name in ("cgroup.procs", "cgroup.subtree_control",
                                                                      "cgroup.threads"))):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)  # what systemd's Delegate=yes does for the user
    seen = run_grader(grader_cgroup, nobody_python, f"{nobody.pw_uid}:{nobody.pw_gid}")
    assert_counted_killed_and_gone(seen, grader_cgroup)
    if cgroups.read_words(grader_cgroup / "cgroup.controllers"):
        assert seen["grader"].endswith(f"/{cgroups.GRADER_LEAF_PREFIX}{seen['pid']}"), seen


def test_leftovers_of_killed_graders_are_swept_and_live_ones_kept(grader_cgroup):
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = grader_cgroup / f"{cgroups.WORKER_PREFIX}{dead.pid}-abc"  # its grader was killed: nobody removed it
    old = grader_cgroup / f"{cgroups.WORKER_PREFIX}k3j2h1g0"  # an older release's name
    live = grader_cgroup / f"{cgroups.WORKER_PREFIX}{os.getppid()}-abc"  # a live grader's, not yet joined
    busy = grader_cgroup / f"{cgroups.WORKER_PREFIX}{dead.pid}-busy"  # someone is still in it
    for group in (gone, old, live, busy):
        group.mkdir()
    sleeper = subprocess.Popen(["sleep", "600"], preexec_fn=lambda: (busy / "cgroup.procs").write_text(
        str(os.getpid())))
    try:
        cgroups.sweep(grader_cgroup)
        assert not gone.exists() and not old.exists() and live.exists() and busy.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_worker_that_cannot_start_leaves_no_cgroup_behind(grader_cgroup):
    """Each failed start left its cgroups until the grader ended: a long test run that could not start
    workers left 130 of them."""
    seen = run_grader(grader_cgroup, script=FAILED_START)
    assert "could not start" in seen["crashed"], seen
    assert "OSError: refused by the test" in seen["crashed"], seen  # which step failed, not only "preexec_fn"
    assert seen["left"] == [], seen
