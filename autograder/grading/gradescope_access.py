"""Gradescope, who may read what: the worker user, locking the autograder root down, and the probes
that prove it before any student code runs.

Its own file because it is the container's trust boundary and deserves reading on its own. `source/`
holds the reference solutions, hidden checks, the test split and the grader's reference cache, so it
is root-only (700); the engine package is installed world-readable in the venv because the worker
imports it. Student code runs in the worker as an unprivileged user (`LMGRADE_WORKER_USER`, honoured
by the sandbox when the grader is root), which can neither read `source/` nor write `results/`;
gradescope.py checks both with what is here before any student code runs, and refuses to grade
otherwise.
"""
from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from autograder.grading.gradescope_zip import CONFIG

DEFAULT_WORKER_USER = "lmgrade-student"
METADATA = "submission_metadata.json"  # Gradescope's, beside source/: earlier submissions and their feedback


class Misconfigured(Exception):
    """The autograder image is not safe or not complete; nothing is graded."""


def worker_user() -> pwd.struct_passwd | None:
    """The user student code runs as, or None when the grader is not root or it is turned off.

    `LMGRADE_WORKER_USER` names it (default lmgrade-student, made by setup.sh); set it empty to run
    student code as the grader's own user (local tests). As root, a missing user is an error: student
    code must never run as root here.
    """
    name = os.environ.get("LMGRADE_WORKER_USER", DEFAULT_WORKER_USER)
    if not name or os.geteuid() != 0:
        return None
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        raise Misconfigured(f"the worker user {name!r} does not exist (setup.sh creates it)") from None
    if user.pw_uid == 0 or user.pw_gid == 0:
        raise Misconfigured(f"the worker user {name!r} is root or in root's group")
    return user


_PROBE = """
found=""
ls "$1" >/dev/null 2>&1 && found="$found read:$1"
cat "$1/CONFIG" >/dev/null 2>&1 && found="$found read:$1/CONFIG"
if ( : > "$2/.lmgrade-probe" ) 2>/dev/null; then found="$found write:$2"; fi
ls "$3" >/dev/null 2>&1 && found="$found read:$3"
cat "$3/METADATA" >/dev/null 2>&1 && found="$found read:$3/METADATA"
echo "$found"
""".replace("CONFIG", CONFIG).replace("METADATA", METADATA)


def lock_down(root: Path, user: pwd.struct_passwd | None) -> None:
    """The whole autograder root root-only (source/, results/, submission_metadata.json with earlier
    submissions' feedback, the submission itself: the worker needs none of it, the grader sends the
    cells); then prove `user` can read none of it and write nothing there."""
    source, results_dir = root / "source", root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    for folder in (root, source, results_dir):  # 0700 on root alone already bars the way; the others stay so
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o700)  # with ACLs, this also empties the mask: no named user or group gets in
    if user is None:
        return
    problems = access_as(user, source, results_dir)
    if problems:
        raise Misconfigured(f"user {user.pw_name} can still {', '.join(problems)}")


def access_as(user: pwd.struct_passwd, source: Path, results_dir: Path) -> list[str]:
    """What `user` can do that it must not: ['read:<source>', 'write:<results>', ...] (empty: good)."""
    proc = subprocess.run(["/bin/sh", "-c", _PROBE, "probe", str(source), str(results_dir), str(source.parent)],
                          capture_output=True, text=True, timeout=30, user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    (results_dir / ".lmgrade-probe").unlink(missing_ok=True)
    if proc.returncode != 0:
        raise Misconfigured(f"could not run a probe as {user.pw_name}: {proc.stderr.strip()[:300]}")
    return proc.stdout.split()


_WORKER_PROBE = """
def lmgrade_probe(source, results):
    import os
    listed = False
    for folder in (source, os.path.dirname(source)):
        try:
            os.listdir(folder)
            listed = True
        except OSError:
            pass
    try:
        os.close(os.open(os.path.join(results, ".lmgrade-worker-probe"), os.O_WRONLY | os.O_CREAT, 0o600))
        wrote = True
    except OSError:
        wrote = False
    return [os.geteuid(), listed, wrote]
"""


def check_worker(root: Path, user: pwd.struct_passwd) -> None:
    """Start a real worker, as grading will, and make sure it runs as `user` and is locked out."""
    from autograder.checking.remote import Student
    from autograder.sandbox.lifecycle import Sandbox
    from autograder.sandbox.limits import Limits
    cells = [{"index": 0, "number": 1, "source": _WORKER_PROBE}]
    try:
        with Sandbox(cells, limits=Limits(call_timeout=30, load_timeout=30)) as box:
            uid, listed, wrote = Student(box, timeout=30).lmgrade_probe(str(root / "source"), str(root / "results"))
    except Exception as exc:  # noqa: BLE001 - any failure here means we cannot vouch for the sandbox
        raise Misconfigured(f"the student process could not be checked: {type(exc).__name__}: {exc}") from None
    finally:
        (root / "results" / ".lmgrade-worker-probe").unlink(missing_ok=True)
    if uid != user.pw_uid or listed or wrote:
        raise Misconfigured(f"student code would run as uid {uid} (expected {user.pw_name}, uid {user.pw_uid}), "
                            f"list the autograder root or source/: {listed}, write results/: {wrote}")
