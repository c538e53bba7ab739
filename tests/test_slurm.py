"""The Slurm recipe of docs/tas.md on a real one-node cluster started here: a batch graded as a job
array of shards, merged by a dependent job, equals one run on this machine (timings aside); a
shard that never ran makes the merge job fail with exit status 3 and write nothing. And, without a
cluster, the recipe's own submit lines run as written: each job's log folder exists when it starts.

The cluster is Debian's slurm-wlm and munge on localhost only: a munge key, a slurm.conf on free
ports, state and spool folders, all under this test's tmp folder; every daemon is stopped at the
end. It runs where `sbatch` is on PATH (apt-get install slurm-wlm munge) and skips otherwise.
Grading is the small copy of `ngram` from test_batch (under a second per submission). Run with
`-s` to see the commands and timings quoted in docs/tas.md.
"""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.authoring import assignments
from autograder.sandbox.limits import confinement
from tests.test_batch import WRONG_TOKENIZE, points, read_grades, solution, tiny  # noqa: F401 - tiny is a fixture
from tests.test_shards import assert_same_outputs, command

DAEMONS = ("sbatch", "scontrol", "sinfo", "slurmctld", "slurmd", "munged")
needs_slurm = [
    pytest.mark.skipif(shutil.which("sbatch") is None,
                       reason="sbatch is not on PATH (a one-node Slurm cluster needs Debian's slurm-wlm and munge)"),
    pytest.mark.skipif(shutil.which("sbatch") is not None and any(shutil.which(d) is None for d in DAEMONS),
                       reason=f"sbatch without the daemons and tools this test starts ({', '.join(DAEMONS)})"),
    pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() != 0,
                       reason="starting slurmd (which runs jobs as their user) needs root"),
]
ROOT = assignments.ROOT
SHARDS = 3
SCRIPT = """#!/bin/bash
#SBATCH --job-name=lmgrade-shards
#SBATCH --cpus-per-task=1
set -euo pipefail
exec "$LMGRADE_PYTHON" -m autograder grade "$SUBMISSIONS" --assignment ngram --device cpu $CONFINEMENT \\
    --out "$GRADES" --jobs "$SLURM_CPUS_PER_TASK" --shard "$SLURM_ARRAY_TASK_ID/$SHARDS"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """slurmctld + slurmd + munged for this test only, on 127.0.0.1; `stop` leaves nothing running."""

    def __init__(self, folder: Path):
        self.dir = folder
        self.host = socket.gethostname().split(".")[0]
        self.node = f"lmgrade{os.getpid()}"
        self.env = dict(os.environ, SLURM_CONF=str(folder / "slurm.conf"))
        self.env.pop("SLURM_JOB_ID", None)  # never mistaken for a job of another cluster

    def start(self) -> None:
        d = self.dir
        for sub in ("munge", "state", "spool", "log"):
            (d / sub).mkdir(mode=0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        subprocess.run(["munged", "--force", f"--key-file={key}", f"--socket={d / 'munge' / 'socket'}",
                        f"--pid-file={d / 'munge' / 'pid'}", f"--log-file={d / 'munge' / 'log'}",
                        f"--seed-file={d / 'munge' / 'seed'}"], check=True, capture_output=True, timeout=30)
        (d / "slurm.conf").write_text(f"""\
ClusterName=lmgradetest
SlurmctldHost={self.host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d / 'munge' / 'socket'}
CredType=cred/munge
StateSaveLocation={d / 'state'}
SlurmdSpoolDir={d / 'spool'}
SlurmctldPidFile={d / 'slurmctld.pid'}
SlurmdPidFile={d / 'slurmd.pid'}
SlurmctldLogFile={d / 'log' / 'slurmctld.log'}
SlurmdLogFile={d / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
KillWait=5
NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={self.host} CPUs={os.cpu_count() or 1} State=UNKNOWN
PartitionName=test Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")
        subprocess.run(["slurmctld", "-i", "-f", str(d / "slurm.conf")], check=True, env=self.env, timeout=30)
        subprocess.run(["slurmd", "-f", str(d / "slurm.conf"), "-N", self.node], check=True, env=self.env, timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = self.run("sinfo", "-h", "-n", self.node, "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                return
            time.sleep(0.5)
        raise AssertionError(f"the node never became idle ({state!r}):\n{self.logs()}")

    def run(self, *args, check=True) -> subprocess.CompletedProcess:
        return subprocess.run(list(args), capture_output=True, text=True, env=self.env, timeout=60, check=check)

    def sbatch(self, *args, env: dict) -> str:
        proc = subprocess.run(["sbatch", "--parsable", *args], capture_output=True, text=True,
                              env={**self.env, **env}, timeout=60)
        assert proc.returncode == 0, proc.stderr + self.logs()
        return proc.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> list[dict[str, str]]:
        """Each task of a job (an array has several): its fields from `scontrol show job -o`."""
        out = self.run("scontrol", "show", "job", "-o", job_id, check=False).stdout
        return [dict(re.findall(r"(\w+)=(\S*)", line)) for line in out.splitlines() if line.strip()]

    def wait(self, *job_ids: str, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            tasks = [t for j in job_ids for t in self.job(j)]
            if tasks and all(t.get("JobState") not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
                             for t in tasks):
                return
            time.sleep(0.5)
        raise AssertionError(f"jobs {job_ids} still not done after {timeout} s:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
                         for p in sorted((self.dir / "log").glob("*.log")))

    def stop(self) -> None:
        self.run("scontrol", "shutdown", check=False)
        for name in ("slurmctld.pid", "slurmd.pid", "munge/pid"):
            pid_file = self.dir / name
            if name == "munge/pid" and pid_file.exists():
                subprocess.run(["munged", "-s", f"--socket={self.dir / 'munge' / 'socket'}"], capture_output=True,
                               timeout=30)
            deadline = time.monotonic() + 20
            while pid_file.exists() and time.monotonic() < deadline:
                try:
                    pid = int(pid_file.read_text())
                    os.kill(pid, 0)
                except (ValueError, OSError):
                    break
                time.sleep(0.2)
            else:
                if pid_file.exists():  # did not stop in time: no daemon of this test outlives it
                    try:
                        os.kill(int(pid_file.read_text()), 9)
                    except (ValueError, OSError):
                        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


def job_env(tiny, subs: Path, grades: Path) -> dict:
    confined = confinement() != "none"  # as root here: Landlock; elsewhere, a worker user
    return {"LMGRADE_ROOT": str(tiny.root), "LMGRADE_PYTHON": sys.executable, "SUBMISSIONS": str(subs),
            "GRADES": str(grades), "SHARDS": str(SHARDS), "CONFINEMENT": "" if confined else "--allow-unconfined"}


def slurm(test):
    """The tests that start a real one-node cluster: they skip where it cannot be started."""
    for mark in needs_slurm:
        test = mark(test)
    return test


@slurm
def test_a_job_array_of_shards_and_a_merge_job_equal_one_run(tmp_path, tiny, cluster):
    subs, grades, single = tmp_path / "subs", tmp_path / "grades", tmp_path / "single"
    subs.mkdir()
    for i in range(9):
        (subs / f"student{i}.py").write_text(solution() + (WRONG_TOKENIZE if i % 3 == 0 else ""))
    (subs / "empty.ipynb").write_text("")
    script = tmp_path / "grade-shards.sbatch"
    script.write_text(SCRIPT)
    env = job_env(tiny, subs, grades)

    started = time.monotonic()
    array = cluster.sbatch(f"--array=0-{SHARDS - 1}", f"--chdir={ROOT}", f"--output={tmp_path}/shard-%a.out",
                           str(script), env=env)
    merge = cluster.sbatch(f"--dependency=afterany:{array}", f"--chdir={ROOT}", f"--output={tmp_path}/merge.out",
                           "--job-name=lmgrade-merge", f"--wrap=exec {sys.executable} -m autograder merge {grades}",
                           env=env)
    cluster.wait(array, merge)
    elapsed = time.monotonic() - started
    tasks, merged = cluster.job(array), cluster.job(merge)[0]
    logs = "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.out")))
    assert len(tasks) == SHARDS and all(t["JobState"] == "COMPLETED" for t in tasks), logs + cluster.logs()
    assert merged["JobState"] == "COMPLETED" and merged["ExitCode"] == "0:0", logs
    print(f"array of {SHARDS} shards + merge job: {elapsed:.1f} s from sbatch to the merge's end")
    print(logs)

    started = time.monotonic()
    proc = subprocess.run(command([subs], single), capture_output=True, text=True, timeout=180,
                          env=dict(os.environ, LMGRADE_ROOT=str(tiny.root)))
    assert proc.returncode == 0, proc.stderr
    print(f"the same batch in one process here: {time.monotonic() - started:.1f} s")
    assert_same_outputs(single, grades)
    assert len(read_grades(grades)) == 10 and read_grades(grades)["student1"]["total"] == points(tiny)


@slurm
def test_a_shard_that_never_ran_fails_the_merge_job_with_status_3(tmp_path, tiny, cluster):
    subs, grades = tmp_path / "subs", tmp_path / "grades"
    subs.mkdir()
    for i in range(6):
        (subs / f"student{i}.py").write_text(solution())
    script = tmp_path / "grade-shards.sbatch"
    script.write_text(SCRIPT)
    env = job_env(tiny, subs, grades)
    array = cluster.sbatch("--array=0,2", f"--chdir={ROOT}", f"--output={tmp_path}/shard-%a.out", str(script),
                           env=env)  # shard 1 of 3 never runs
    merge = cluster.sbatch(f"--dependency=afterany:{array}", f"--chdir={ROOT}", f"--output={tmp_path}/merge.out",
                           f"--wrap=exec {sys.executable} -m autograder merge {grades}", env=env)
    cluster.wait(array, merge)
    merged = cluster.job(merge)[0]
    text = (tmp_path / "merge.out").read_text()
    print(f"merge job without shard 1: {merged['JobState']} {merged['ExitCode']}\n{text}")
    assert merged["JobState"] == "FAILED" and merged["ExitCode"] == "3:0", text
    assert "shard 1/3: no manifest" in text and "nothing written" in text and not (grades / "grades.csv").exists()

    rerun = cluster.sbatch("--array=1", f"--chdir={ROOT}", f"--output={tmp_path}/shard-%a.out", str(script), env=env)
    merge = cluster.sbatch(f"--dependency=afterany:{rerun}", f"--chdir={ROOT}", f"--output={tmp_path}/merge.out",
                           f"--wrap=exec {sys.executable} -m autograder merge {grades}", env=env)
    cluster.wait(rerun, merge)
    assert cluster.job(merge)[0]["ExitCode"] == "0:0", (tmp_path / "merge.out").read_text()
    assert {row["total"] for row in read_grades(grades).values()} == {points(tiny)}


# ---- the recipe as docs/tas.md writes it -----------------------------------------------------------
FAKE_SBATCH = """#!{python}
# Submits nothing: records what a job would need when it starts. Slurm opens a job's log (its
# --output, relative to the folder sbatch ran in) when the job starts, and never creates its folder.
import json, os, re, sys
args, script, output = sys.argv[1:], None, None
i = 0
while i < len(args):
    a = args[i]
    if a.startswith("--output="):
        output = a.split("=", 1)[1]
    elif a == "--wrap":
        i += 1
    elif not a.startswith("-") and script is None:
        script = a
    i += 1
if output is None and script:
    found = re.search(r"^#SBATCH --output=(\\S+)", open(script).read(), re.M)
    output = found and found.group(1)
log = output or "slurm-%j.out"
folder = os.path.dirname(log) or "."
with open(os.environ["FAKE_SBATCH_LOG"], "a") as f:
    f.write(json.dumps({{"args": args, "log": log, "folder_exists": os.path.isdir(folder)}}) + "\\n")
print("4242" if "--parsable" in args else "Submitted batch job 4242")
"""


def recipe() -> tuple[str, str]:
    """(grade-shards.sbatch, the lines that submit it) from docs/tas.md's Slurm section."""
    text = (ROOT / "docs" / "tas.md").read_text()
    section = text.split("### Slurm: a job array, then a merge job", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    assert len(blocks) >= 2, "the Slurm section lost its script or its submit lines"
    return blocks[0], blocks[1]


def test_the_slurm_recipe_makes_its_log_folder_before_it_submits(tmp_path):
    """The submit lines of docs/tas.md run as written (bash, from a fresh folder) with an `sbatch` that
    records each job: every job's log folder exists when it is submitted, the array's and the merge's."""
    script, submit = recipe()
    assert "#SBATCH --output=logs/" in script  # the folder this recipe must make
    (tmp_path / "grade-shards.sbatch").write_text(script)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text(FAKE_SBATCH.format(python=sys.executable))
    fake.chmod(0o755)
    record = tmp_path / "submitted.jsonl"
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", FAKE_SBATCH_LOG=str(record))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", submit], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    jobs = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(jobs) == 2, jobs  # the array, then the merge
    assert jobs[0]["log"].startswith("logs/") and jobs[1]["log"].startswith("logs/"), jobs
    assert "--dependency=afterany:4242" in jobs[1]["args"]  # the merge waits for the array just submitted
    assert all(job["folder_exists"] for job in jobs), f"a job's log folder did not exist when submitted: {jobs}"
