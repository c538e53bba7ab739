"""A batch split into shards (`lmgrade grade ... --shard K/N`), run as parallel local processes, and
merged (`lmgrade merge`): the merge must equal one run over the same inputs, timings aside; a
missing, killed or out-of-date shard is named and nothing is written; a new input never moves
another student to another shard; each shard resumes on its own.

Everything grades the small copy of `ngram` from test_batch (its public checks and one tiny hidden
check: well under a second per submission), through the real command in child processes.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import cli
from autograder.grading import batch, shard, submissions
from tests.test_batch import (WRONG_ASSIGNMENT, WRONG_TOKENIZE, make_export, points, read_grades,  # noqa: F401
                              solution, tiny, zip_folder)

TIMING = re.compile(r"\(device (\S+), \d+(\.\d+)? s\)")  # the one timing in a feedback file


def command(inputs, out, *extra) -> list[str]:
    return [sys.executable, "-m", "autograder", "grade", *map(str, inputs), "--assignment", "ngram", "--device",
            "cpu", "--allow-unconfined", "--out", str(out), *map(str, extra)]


def lmgrade(args: list[str], root: Path, **kwargs) -> subprocess.CompletedProcess:
    env = dict(os.environ, LMGRADE_ROOT=str(root))
    return subprocess.run(args, capture_output=True, text=True, timeout=180, env=env, **kwargs)


def merge(*args, root: Path) -> subprocess.CompletedProcess:
    return lmgrade([sys.executable, "-m", "autograder", "merge", *map(str, args)], root)


def run_shards(inputs, outs, n: int, root: Path, only=None) -> list[subprocess.CompletedProcess]:
    """Shards K of N as parallel processes; `outs` one folder for all, or one per shard."""
    env = dict(os.environ, LMGRADE_ROOT=str(root))
    procs = []
    for k in (range(n) if only is None else only):
        out = outs[k] if isinstance(outs, list) else outs
        procs.append((command(inputs, out, "--shard", f"{k}/{n}"),
                      subprocess.Popen(command(inputs, out, "--shard", f"{k}/{n}"), env=env, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    done = []
    for args, proc in procs:
        stdout, stderr = proc.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(args, proc.returncode, stdout, stderr))
    return done


def assert_same_outputs(single: Path, merged: Path) -> None:
    """grades.csv, leaderboard.csv and report.html, the summary (but its first line, which says how
    the records came), every feedback file (timings aside) and the histogram: the same."""
    for name in ("grades.csv", "leaderboard.csv", "report.html"):
        assert (merged / name).read_text() == (single / name).read_text(), name
    one, other = ((p / "summary.txt").read_text().splitlines() for p in (single, merged))
    assert other[1:] == one[1:]
    head = re.compile(r"^\w+: \d+ submissions")  # "ngram: 14 submissions" in both
    assert head.match(other[0])[0] == head.match(one[0])[0]
    names = sorted(p.name for p in (single / "feedback").iterdir())
    assert sorted(p.name for p in (merged / "feedback").iterdir()) == names
    for name in names:
        a, b = ((p / "feedback" / name).read_text() for p in (single, merged))
        assert TIMING.sub("(device \\1)", b) == TIMING.sub("(device \\1)", a), name
    assert (merged / "histogram.png").read_bytes() == (single / "histogram.png").read_bytes()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[Path]:
    """A folder as a TA meets it (two files of one student, a wrong one, the starter, an unreadable
    file, another assignment's notebook, an empty folder) and a Gradescope export .zip (a group)."""
    tmp = tmp_path_factory.mktemp("shard-inputs")
    subs = tmp / "subs"
    subs.mkdir()
    for name in ("alice_ngram.py", "erin.py", "frank.py", "gina.py"):
        (subs / name).write_text(solution())
    (subs / "alice.ipynb").write_text(starter_text())  # alice twice: "alice (alice.ipynb)", "alice (alice_ngram.py)"
    (subs / "carol.py").write_text(solution() + WRONG_TOKENIZE)
    (subs / "bob.ipynb").write_text(starter_text())
    (subs / "empty.ipynb").write_text("")
    (subs / "wrong.ipynb").write_text(WRONG_ASSIGNMENT)
    (subs / "dave").mkdir()
    archive = zip_folder(make_export(tmp), tmp / "export.zip")
    return [subs, archive]


def starter_text() -> str:
    from autograder.authoring import assignments
    return assignments.get("ngram").starter_path.read_text()


@pytest.fixture(scope="module")
def single(tmp_path_factory, tiny, inputs) -> Path:
    out = tmp_path_factory.mktemp("single") / "out"
    proc = lmgrade(command(inputs, out), tiny.root)
    assert proc.returncode == 0, proc.stderr
    assert len(read_grades(out)) == 15  # 10 rows from the folder, 5 from the export (4 submissions, a pair)
    return out


def owned(inputs, tiny, tmp_path, n: int) -> dict[int, list[str]]:
    """Record keys per shard, as the shards will compute them."""
    entries = submissions.discover(inputs, tiny, tmp_path / "discover")
    found = {k: [] for k in range(n)}
    for e in entries:
        found[shard.shard_of(shard.owner(e), n)].append(e.key)
    return found


# ---- the merge equals a single run ---------------------------------------------------------------
def test_parallel_shards_sharing_one_out_merge_to_the_single_run(tmp_path, tiny, inputs, single):
    out = tmp_path / "out"
    runs = run_shards(inputs, out, 3, tiny.root)
    for k, proc in enumerate(runs):
        assert proc.returncode == 0, proc.stderr
        assert f"ngram shard {k}/3: " in proc.stdout and f"lmgrade merge {out}" in proc.stdout
    assert not (out / "grades.csv").exists() and not (out / "feedback").exists()  # outputs are merge's alone
    assert sorted(p.name for p in (out / ".lmgrade" / "shards").glob("*.json")) == ["0-of-3.json", "1-of-3.json",
                                                                                 "2-of-3.json"]
    parts = [[e["entry"]["key"] for e in json.loads((out / ".lmgrade" / "shards" / f"{k}-of-3.json").read_text())
              ["entries"]] for k in range(3)]
    keys = {p.stem for p in (single / ".lmgrade" / "records").glob("*.json")}
    assert sorted(sum(parts, [])) == sorted(keys)  # every submission in exactly one shard, keys as a single run's
    assert {p.stem for p in (out / ".lmgrade" / "records").glob("*.json")} == keys

    merged = merge(out, root=tiny.root)
    assert merged.returncode == 0, merged.stderr
    assert "14 submissions, merged from 3 shards; graded 14, could not be graded 0" in merged.stdout
    assert_same_outputs(single, out)

    again = run_shards(inputs, out, 3, tiny.root, only=[1])[0]  # each shard resumes on its own
    assert again.returncode == 0 and f"graded now 0, unchanged since the last run {len(parts[1])}" in again.stdout


def test_shards_in_separate_folders_merge_into_one(tmp_path, tiny, inputs, single):
    outs = [tmp_path / "shard-0", tmp_path / "shard-1"]
    assert all(proc.returncode == 0 for proc in run_shards(inputs, outs, 2, tiny.root))
    unsaid = merge(*outs, root=tiny.root)
    assert unsaid.returncode == 2 and "--out DIR" in unsaid.stderr
    merged = merge(*outs, "--out", tmp_path / "grades", root=tiny.root)
    assert merged.returncode == 0, merged.stderr
    assert_same_outputs(single, tmp_path / "grades")
    # every record is copied beside the merged outputs: one run there later grades nothing again
    later = lmgrade(command(inputs, tmp_path / "grades"), tiny.root)
    assert later.returncode == 0 and "graded now 0, unchanged since the last run 14" in later.stdout
    assert_same_outputs(single, tmp_path / "grades")


# ---- what merge refuses --------------------------------------------------------------------------
def test_a_missing_shard_is_named_and_nothing_is_written(tmp_path, tiny, inputs, single):
    parts = owned(inputs, tiny, tmp_path, 3)
    assert parts[1], parts  # shard 1 has students to lose
    out = tmp_path / "out"
    assert all(proc.returncode == 0 for proc in run_shards(inputs, out, 3, tiny.root, only=[0, 2]))
    refused = merge(out, root=tiny.root)
    assert refused.returncode == shard.INCOMPLETE == 3, refused.stderr
    assert "cannot merge: 1 of 3 shards missing or unfinished (1); nothing written" in refused.stderr
    assert f"shard 1/3: no manifest in {out}" in refused.stderr and f"its {len(parts[1])} submission(s)" in refused.stderr
    assert "--shard 1/3" in refused.stderr and "Traceback" not in refused.stderr
    assert not any((out / name).exists() for name in ("grades.csv", "summary.txt", "histogram.png", "feedback"))

    # the same with separate folders: the one not given is as missing as the one never run
    separate = [tmp_path / f"s{k}" for k in range(3)]
    assert all(proc.returncode == 0 for proc in run_shards(inputs, separate, 3, tiny.root))
    refused = merge(separate[0], separate[2], "--out", tmp_path / "grades", root=tiny.root)
    assert refused.returncode == 3 and "shard 1/3: no manifest" in refused.stderr
    assert not (tmp_path / "grades" / "grades.csv").exists()

    assert run_shards(inputs, out, 3, tiny.root, only=[1])[0].returncode == 0
    assert merge(out, root=tiny.root).returncode == 0
    assert_same_outputs(single, out)


def test_a_crashed_shard_leaves_the_others_records_intact_and_resumes(tmp_path, tiny):
    """Shard 0 is killed (SIGKILL: a dead node) after its first record; shard 1 finishes. The merge
    names shard 0 and how far it got; shard 1's records are untouched; shard 0 run again grades
    only what it had not saved."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for i in range(16):
        (subs / f"s{i:02d}.py").write_text(solution())
    parts = owned([subs], tiny, tmp_path, 2)
    assert len(parts[0]) >= 4 and parts[1], parts
    scratch = tmp_path / "tmp"  # graders and workers keep their files here: it marks their command lines
    scratch.mkdir()
    env = dict(os.environ, LMGRADE_ROOT=str(tiny.root), TMPDIR=str(scratch))
    procs = [subprocess.Popen(command([subs], out, "--shard", f"{k}/2"), env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True) for k in range(2)]
    records = out / ".lmgrade" / "records"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any((records / f"{key}.json").exists() for key in parts[0]):
        time.sleep(0.02)
    assert procs[0].poll() is None, "shard 0 ended before it could be killed"
    os.killpg(procs[0].pid, signal.SIGKILL)
    procs[0].communicate(timeout=30)
    stdout, stderr = procs[1].communicate(timeout=120)
    assert procs[1].returncode == 0, stderr
    saved = [key for key in parts[0] if (records / f"{key}.json").exists()]
    assert 1 <= len(saved) < len(parts[0])
    before = {key: (records / f"{key}.json").read_bytes() for key in parts[1]}

    refused = merge(out, root=tiny.root)
    assert refused.returncode == 3, refused.stderr
    # the count is the manifest's, written after each record: a kill between the two leaves it one behind
    said = re.search(rf"shard 0/2: (\d+) of {len(parts[0])} saved; its manifest says it is running", refused.stderr)
    assert said and len(saved) - 1 <= int(said.group(1)) <= len(saved), refused.stderr
    assert "shard 1/2" not in refused.stderr and not (out / "grades.csv").exists()
    manifest = json.loads((out / ".lmgrade" / "shards" / "1-of-2.json").read_text())
    assert manifest["state"] == "finished" and all(item["done"] for item in manifest["entries"])
    assert {key: (records / f"{key}.json").read_bytes() for key in parts[1]} == before

    again = lmgrade(command([subs], out, "--shard", "0/2"), tiny.root)
    assert again.returncode == 0, again.stderr
    assert (f"graded now {len(parts[0]) - len(saved)}, unchanged since the last run {len(saved)}"
            in again.stdout), again.stdout
    merged = merge(out, root=tiny.root)
    assert merged.returncode == 0, merged.stderr
    grades = read_grades(out)
    assert len(grades) == 16 and {row["total"] for row in grades.values()} == {points(tiny)}
    deadline = time.monotonic() + 20  # the killed shard's grader ends once its last job is answered
    while time.monotonic() < deadline and _ours(str(scratch)):
        time.sleep(0.2)
    assert _ours(str(scratch)) == []


def _ours(marker: str) -> list[str]:
    """Live processes whose command line names `marker` (graders name their TMPDIR's scratch)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                environ = (entry / "environ").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if state not in "ZX" and (marker in cmdline or f"TMPDIR={marker}" in environ):
                found.append(f"{entry.name}: {cmdline[:120]}")
    return found


# ---- the partition ---------------------------------------------------------------------------------
def test_adding_an_input_keeps_every_other_inputs_shard(tmp_path, tiny, inputs):
    """A late submission, a second file of one student, a new folder: nobody else moves, so every
    shard's saved records stay valid and only the newcomer's shard grades anything."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann.py", "ben.py", "cyd.py", "dot.py", "ed.py", "flo.py", "guy.py"):
        (subs / name).write_text(solution())
    before = submissions.discover([subs, inputs[1]], tiny, tmp_path / "a")
    (subs / "zoe.py").write_text(solution())
    (subs / "ann.ipynb").write_text(starter_text())  # ann.py's key becomes "ann (ann.py)"; her shard stays
    (subs / "Hal").mkdir()
    (subs / "Hal" / "ngram.py").write_text(solution())
    after = submissions.discover([subs, inputs[1]], tiny, tmp_path / "b")
    for n in range(1, 9):
        was = {shard.owner(e): shard.shard_of(shard.owner(e), n) for e in before}
        now = {shard.owner(e): shard.shard_of(shard.owner(e), n) for e in after}
        assert {o: now[o] for o in was} == was
        ann = {shard.shard_of(shard.owner(e), n) for e in after if e.owner == "ann"}
        assert len(ann) == 1  # both of ann's files in one shard
    # a position in the sorted list would have moved most of them
    keys = sorted(shard.owner(e) for e in after)
    moved = [o for i, o in enumerate(sorted(shard.owner(e) for e in before)) if keys.index(o) % 3 != i % 3]
    assert moved

    out = tmp_path / "out"
    (subs / "zoe.py").rename(tmp_path / "zoe.py")
    (subs / "ann.ipynb").rename(tmp_path / "ann.ipynb")
    (subs / "Hal" / "ngram.py").rename(tmp_path / "hal.py")
    assert all(proc.returncode == 0 for proc in run_shards([subs], out, 3, tiny.root))
    assert merge(out, root=tiny.root).returncode == 0
    (tmp_path / "zoe.py").rename(subs / "zoe.py")  # a late submission
    runs = run_shards([subs], out, 3, tiny.root)
    graded = [int(re.search(r"graded now (\d+)", proc.stdout)[1]) for proc in runs]
    assert sorted(graded) == [0, 0, 1] and graded.index(1) == shard.shard_of("zoe", 3), [p.stdout for p in runs]
    assert merge(out, root=tiny.root).returncode == 0 and read_grades(out)["zoe"]["total"] == points(tiny)


def test_a_shard_that_saw_other_inputs_is_not_merged_and_merge_says_which_files_differ(tmp_path, tiny):
    """Inputs that changed between shards (a late file, a resubmission, a withdrawn one): the shard
    that saw the older folder is named, with the files that differ, and nothing is written."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    names = ("ann.py", "ben.py", "cyd.py", "dot.py", "eve.py")
    for name in names:
        (subs / name).write_text("")  # unreadable: recorded without a grader, quick
    assert all(proc.returncode == 0 for proc in run_shards([subs], out, 2, tiny.root))
    late = 1 - shard.shard_of("zoe", 2)  # the newest shard: it never owned zoe, but saw her
    early = 1 - late
    (subs / "zoe.py").write_text("")
    (subs / "ben.py").write_text("x = 1\n")  # resubmitted
    (subs / "cyd.py").unlink()  # withdrawn
    assert run_shards([subs], out, 2, tiny.root, only=[late])[0].returncode == 0
    refused = merge(out, root=tiny.root)
    assert refused.returncode == 3, refused.stderr
    assert (f"shard {early}/2 saw other submissions than the newest shard, {late}/2 (5 found, the newest found 5; "
            "added since it ran (1): zoe.py; removed since it ran (1): cyd.py; changed since it ran (1): ben.py)"
            in refused.stderr), refused.stderr
    assert f"cannot merge: 1 of 2 shards missing or unfinished ({early})" in refused.stderr
    assert not (out / "grades.csv").exists()
    assert run_shards([subs], out, 2, tiny.root, only=[early])[0].returncode == 0  # the same inputs now
    assert merge(out, root=tiny.root).returncode == 0 and sorted(read_grades(out)) == ["ann", "ben", "dot", "eve",
                                                                                         "zoe"]


def test_merge_names_a_few_differing_files_then_a_count():
    files = [[f"s{i}", f"s{i}.py", "a" * 64, f"subs/s{i}.py"] for i in range(3)]
    newer = files + [[f"n{i}", f"n{i}.py", "b" * 64, f"subs/n{i}.py"] for i in range(8)]
    assert shard.differences(files, newer) == "added since it ran (8): n0.py, n1.py, n2.py, n3.py, n4.py and 3 more"
    assert shard.batch_digest(files) != shard.batch_digest(newer)
    moved = [[key, name, sha, "/elsewhere/" + name] for key, name, sha, _ in files]
    assert shard.batch_digest(moved) == shard.batch_digest(files)  # where the folder is plays no part


def test_shards_started_with_other_spellings_of_one_folder_merge(tmp_path, tiny):
    """One shard started as `subs` from the course folder, the other with its absolute path (and
    its OUT typed both ways): the same batch. The merge writes every file name one way."""
    subs = tmp_path / "subs"
    subs.mkdir()
    for name in ("ann.py", "ben.py", "cyd.py", "dot.py", "eve.py", "fay.py"):
        (subs / name).write_text(solution() if name == "ann.py" else "")
    parts = owned([subs], tiny, tmp_path, 2)
    assert parts[0] and parts[1], parts
    absolute = lmgrade(command([subs], tmp_path / "out", "--shard", "0/2"), tiny.root)
    relative = lmgrade(command(["subs"], "out", "--shard", "1/2"), tiny.root, cwd=tmp_path)
    assert absolute.returncode == 0 and relative.returncode == 0, absolute.stderr + relative.stderr
    merged = merge(tmp_path / "out", root=tiny.root)
    assert merged.returncode == 0, merged.stderr
    grades = read_grades(tmp_path / "out")
    assert sorted(grades) == ["ann", "ben", "cyd", "dot", "eve", "fay"] and grades["ann"]["total"] == points(tiny)
    assert len({str(Path(row["submission"]).parent) for row in grades.values()}) == 1, grades  # one spelling
    again = lmgrade(command(["./subs/"], "out", "--shard", "0/2"), tiny.root, cwd=tmp_path)
    assert f"graded now 0, unchanged since the last run {len(parts[0])}" in again.stdout, again.stdout + again.stderr


# ---- arguments ------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, message", [("4/4", "K goes from 0 to N-1 (0/4 to 3/4)"), ("1/0", "at least 1"),
                                            ("two", "is not K/N"), ("-1/4", "is not K/N")])
def test_shard_argument_errors_exit_2(value, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["grade", "subs", "--assignment", "ngram", "--out", "o", f"--shard={value}"])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_merge_argument_errors_exit_2(tmp_path, tiny, capsys):
    (tmp_path / "empty").mkdir()
    assert cli.main(["merge", str(tmp_path / "empty")]) == 2
    assert "no shard manifests" in capsys.readouterr().err
    assert cli.main(["merge", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    subs, one, two = tmp_path / "subs", tmp_path / "one", tmp_path / "two"
    subs.mkdir()
    (subs / "ann.py").write_text("")  # unreadable: recorded without a grader, quick
    for out in (one, two):
        batch.run([subs], tiny, out, shard=(0, 1), progress=False)
    assert shard.merge([one], assignment=tiny).entries[0].key == "ann"
    with pytest.raises(ValueError, match="shard 0/1 is in both"):
        shard.merge([one, two], tmp_path / "grades", assignment=tiny)
    assert cli.main(["merge", str(one), "--assignment", "attention"]) == 2
    assert "these shards graded ngram, not attention" in capsys.readouterr().err


def test_a_changed_record_or_other_checks_are_not_merged(tmp_path, tiny, monkeypatch):
    """The manifest's fingerprint names the record its shard saved; checks changed since the shard
    graded mean its records are not this checkout's grades. Either way: named, nothing written."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("ann.py", "ben.py"):
        (subs / name).write_text("")  # unreadable: recorded without a grader, quick
    batch.run([subs], tiny, out, shard=(0, 1), progress=False)
    record = out / ".lmgrade" / "records" / "ann.json"
    original = record.read_text()
    record.write_text(original.replace('"unreadable"', '"graded"', 1))
    with pytest.raises(shard.Incomplete, match=r"shard 0/1: 1 of 2 saved; it finished.*1 record\(s\) changed "
                                               r"since it saved them \(ann\)"):
        shard.merge([out], assignment=tiny)
    record.write_text(original)
    monkeypatch.setattr(shard, "checks_digest", lambda assignment: "other checks")
    with pytest.raises(shard.Incomplete, match="shard 0/1 was graded with other checks than this checkout's"):
        shard.merge([out], assignment=tiny)
    assert not (out / "grades.csv").exists()
    monkeypatch.undo()
    assert shard.merge([out], assignment=tiny).graded == 2 and (out / "grades.csv").exists()


def test_a_shard_typed_otherwise_and_interrupted_keeps_its_saved_records_mergeable(tmp_path, tiny, monkeypatch):
    """Rerun with the folder typed otherwise, the shard notes where each unchanged file is now; if it
    is then stopped before the end, every record it kept still matches its manifest: the merge names
    only what was not graded, never a saved record as changed."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    for name in ("ann.py", "ben.py"):
        (subs / name).write_text("")  # unreadable: recorded without a grader, quick
    batch.run([subs], tiny, out, shard=(0, 1), progress=False)
    (subs / "cyd.py").write_text(solution())  # new: to be graded when the shard is stopped

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(batch, "_grade_all", stopped)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(batch.Interrupted):
        batch.run([Path("subs")], tiny, Path("out"), shard=(0, 1), progress=False)
    with pytest.raises(shard.Incomplete) as info:
        shard.merge([out], assignment=tiny)
    said = str(info.value)
    assert "shard 0/1: 2 of 3 saved; it was interrupted" in said and "not saved: cyd" in said, said
    assert "changed since" not in said
    record = json.loads((out / ".lmgrade" / "records" / "ann.json").read_text())
    assert record["source"] == str(Path("subs") / "ann.py")
