"""The `lmgrade` command: build, check (students), grade (TAs), selfcheck (the quick-start job).

Exit status: 0 whenever grading ran, whatever the score; 2 for wrong arguments; 1 when the grader
itself failed (with a message, and for `--json` a valid results file that says so).
"""
from __future__ import annotations

import argparse
import re
import signal
import sys
import tempfile
from pathlib import Path

from autograder.authoring import assignments
from autograder.errors import GraderFault
from autograder.grading import redaction, results, runner
from autograder.sandbox import extract, limits

# What grading one submission does not need is imported by the command that does: the build (nbformat
# and its schema validation), the batch, its shards and report. One `lmgrade grade --json`, which is
# what Gradescope runs, then loads 6 MiB and about 0.2 s of CPU less.

STAFF_COMMANDS = ("build", "gradescope", "grade", "merge", "mutants", "selfcheck")  # need the course's hidden checks and solutions
_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
INTERRUPTED = 130  # what a shell reports for a command ended by Ctrl-C
GRADER_FAULT = 4  # grading could not be completed on the grader's side (errors.GraderFault): no score

EXAMPLES = {
    "lmgrade": """examples:
  lmgrade check starter_notebooks/ngram.ipynb              run the public checks on your notebook
  lmgrade grade subs/ --assignment ngram --out grades/     grade a folder of submissions (TAs)
  lmgrade selfcheck                                        solutions full marks, starters zero

Each command has its own --help with an example.""",
    "lmgrade-student": """examples:
  lmgrade check starter_notebooks/ngram.ipynb              run the public checks on your notebook
  lmgrade check ngram.ipynb --question 2                   only question 2 (quicker while you work on it)
  lmgrade export ngram.ipynb                               the PDF of your written answers, to upload

In a notebook, check_notebook() does the same for the notebook that is open.""",
    "build": """examples:
  lmgrade build                      regenerate starters, solutions/<id>.py and public fixtures
  lmgrade build --check              exit 1 if a committed generated file is stale (CI)
  lmgrade build --student-bundle handout/ --assignment ngram""",
    "gradescope": """example:
  lmgrade gradescope build --assignment ngram --output ngram-autograder.zip""",
    "gradescope build": """example:
  lmgrade gradescope build --assignment ngram --output ngram-autograder.zip""",
    "check": """examples:
  lmgrade check starter_notebooks/ngram.ipynb
  lmgrade check "ngram (1).ipynb" --assignment ngram --question 2""",
    "grade": """examples:
  lmgrade grade alice_ngram.ipynb --assignment ngram --json results.json      one submission
  lmgrade grade subs/ --assignment ngram --out grades/ --jobs 2               a folder (one file or folder per student)
  lmgrade grade export.zip --assignment ngram --out grades/                   a Gradescope "Export Submissions" zip
  lmgrade grade subs/ --assignment ngram --out grades/ --question 3           regrade question 3 for everyone
  lmgrade grade subs/ --assignment ngram --out grades/ --shard 2/8            part 2 of 8 (then: lmgrade merge grades/)

Ctrl-C stops a batch cleanly; the same command continues where it stopped.""",
    "export": """examples:
  lmgrade export ngram.ipynb                        writes ngram-written.pdf beside it (run the figure cells first)
  lmgrade export ngram.ipynb --output answers.pdf
  lmgrade export ngram.ipynb --html                 HTML to print from a browser yourself""",
    "merge": """examples:
  lmgrade merge grades/                             shards that shared one OUT folder
  lmgrade merge shard-0/ shard-1/ --out grades/     shards that wrote separate folders

Exit status 3 (and nothing written) when a shard is missing or unfinished; it names the command that finishes it.""",
    "mutants": """examples:
  lmgrade mutants attention --out mutants/attention/ --jobs 2     every graded function, 6 mutants each
  lmgrade mutants attention --question 3 --per-function 20        only question 3's functions, more of them

Writes OUT/mutants.html (every survivor as a diff) and OUT/mutants.csv; a rerun resumes. Accept a survivor that
is not a bug in assignments/<id>/meta.toml: [mutants.accepted] then "ID" = "why".""",
    "selfcheck": """example:
  lmgrade selfcheck        (about 2 minutes with a warm cache, on two cores; exit 1 on any unexpected score)""",
}


def device_arg(value: str) -> str:
    """--device: auto, cpu, cuda or cuda:N, nothing else (a typo must never grade on the wrong device)."""
    if not _DEVICE.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a device: use auto, cpu, cuda or cuda:N (e.g. cuda:0)")
    return value


def version() -> str:
    """The installed package's version, else the source tree's."""
    import importlib.metadata
    try:
        return importlib.metadata.version("lmgrade")
    except importlib.metadata.PackageNotFoundError:
        import autograder
        return getattr(autograder, "__version__", "unknown")


class _Version(argparse.Action):
    """--version, looked up only when asked (reading the installed package's metadata takes time)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"lmgrade {version()}")
        parser.exit()


def _shard_arg(text: str) -> tuple[int, int]:
    """--shard K/N (see `shard.parse`)."""
    from autograder.grading import shard
    return shard.parse(text)


class _NeverRaised(Exception):
    """Stands in for an error class of a module this command never imported."""


def _loaded(module: str, name: str) -> type:
    """`module.name` where that module was imported (only then can it have raised it), else _NeverRaised."""
    found = sys.modules.get(module)
    return getattr(found, name) if found is not None else _NeverRaised


def _in_bundle() -> bool:
    """True in the student bundle: no hidden checks and no solutions beside the engine, so the staff
    commands (build, grade, gradescope, selfcheck) cannot work and are not offered."""
    root = assignments.ROOT
    return not (root / "solutions").is_dir() and not any((root / "assignments").glob("*/hidden_checks.py"))


def _parser(description: str, epilog: str) -> dict:
    return {"description": description, "epilog": epilog, "formatter_class": argparse.RawDescriptionHelpFormatter}


def make_parser(bundle: bool | None = None) -> argparse.ArgumentParser:
    bundle = _in_bundle() if bundle is None else bundle
    parser = argparse.ArgumentParser(
        prog="lmgrade", **_parser("Homework and autograder for a course on language models.",
                                  EXAMPLES["lmgrade-student" if bundle else "lmgrade"]))
    parser.add_argument("--version", action=_Version, help="show the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    if not bundle:
        p = sub.add_parser("build", help="regenerate starter notebooks, reference modules and public fixtures",
                           **_parser("Regenerate every generated file from assignments/<id>/source.py.",
                                     EXAMPLES["build"]))
        p.add_argument("--check", action="store_true", help="exit 1 if a committed generated file is stale")
        p.add_argument("--solutions", type=Path, metavar="DIR", help="also write the staff solution notebooks into DIR")
        p.add_argument("--student-bundle", type=Path, metavar="DIR",
                       help="also write what students download into DIR (starters, public checks, train/validation data)")
        p.add_argument("--assignment", action="append", choices=assignments.IDS,
                       help="with --student-bundle: bundle only this assignment (repeatable; default: every finished one)")

        p = sub.add_parser("gradescope", help="course staff: the Gradescope autograder",
                           **_parser("Course staff: the Gradescope autograder.", EXAMPLES["gradescope"]))
        gs = p.add_subparsers(dest="gradescope_command", required=True)
        p = gs.add_parser("build", help="write the autograder zip to upload to Gradescope",
                          **_parser("Write the autograder zip to upload to Gradescope.",
                                    EXAMPLES["gradescope build"]))
        p.add_argument("--assignment", required=True, choices=assignments.IDS)
        p.add_argument("--output", type=Path, metavar="ZIP", help="default: build/gradescope-<assignment>.zip")
        p.add_argument("--leaderboard", action="store_true",
                       help="also show held-out figures of trained models (perplexity, accuracy) on Gradescope's "
                            "leaderboard, rounded, as soon as students submit (default: only in the TA's report)")

    p = sub.add_parser("check", help="run the public checks on your notebook (what a student runs)",
                       **_parser("Run the public checks on a saved notebook (or .py), in a separate process.",
                                 EXAMPLES["check"]))
    p.add_argument("notebook", type=Path)
    p.add_argument("--assignment", choices=assignments.IDS, help="default: read from the notebook")
    p.add_argument("--question", action="append", help="check only this question (repeatable)")

    p = sub.add_parser("export", help="the PDF of your notebook's written answers, to upload for manual grading",
                       **_parser("Write the PDF of the written questions (each on a new page, with its figures and your "
                                 "answer). Nothing is run and the notebook is not changed.", EXAMPLES["export"]))
    p.add_argument("notebook", type=Path)
    p.add_argument("--output", type=Path, metavar="FILE", help="default: <notebook>-written.pdf beside the notebook")
    p.add_argument("--html", action="store_true", help="write HTML instead of printing a PDF")

    if not bundle:
        p = sub.add_parser("grade", help="run every check on submissions (what a TA runs)",
                           **_parser("Run every check, hidden ones included, on one submission or a batch.",
                                     EXAMPLES["grade"]))
        p.add_argument("submissions", nargs="+", type=Path)
        p.add_argument("--assignment", required=True, choices=assignments.IDS)
        # the CPU unless asked: the same score on every machine, and CUDA grading has run on one GPU only
        p.add_argument("--device", default="cpu", type=device_arg, metavar="DEVICE",
                       help="cpu, cuda, cuda:N or auto (cuda when present); default: cpu")
        p.add_argument("--question", action="append",
                       help="grade only this question (repeatable); with --out: regrade it across the batch")
        p.add_argument("--json", type=Path, metavar="PATH", help="write Gradescope results.json here (one submission)")
        p.add_argument("--out", type=Path, metavar="DIR",
                       help="batch mode: write grades.csv, feedback/, summary.txt, histogram.png, report.html and "
                            "leaderboard.csv into DIR")
        p.add_argument("--jobs", type=int, default=1, metavar="N", help="batch mode: grade N submissions at a time")
        p.add_argument("--force", action="store_true", help="batch mode: regrade submissions graded before")
        p.add_argument("--allow-unconfined", action="store_true",
                       help="grade even where student code cannot be confined (no Landlock, no worker user): "
                            "only for submissions you trust")
        p.add_argument("--shard", type=_shard_arg, metavar="K/N",
                       help="batch mode: grade only part K of N (K from 0 to N-1, e.g. $SLURM_ARRAY_TASK_ID/8), "
                            "saving its records; `lmgrade merge OUT` then writes grades.csv and the rest")

        p = sub.add_parser("merge", help="write one grades.csv from the shards of a batch (grade --shard K/N)",
                           **_parser("Write grades.csv, feedback/, summary.txt, histogram.png, report.html and "
                                     "leaderboard.csv from every shard's records, as one run over the whole "
                                     "batch would; refuse (exit 3) while a "
                                     "shard is missing or unfinished.", EXAMPLES["merge"]))
        p.add_argument("outs", nargs="+", type=Path, metavar="OUT", help="the --out folder(s) the shards graded into")
        p.add_argument("--out", type=Path, metavar="DIR", help="write the merged outputs here (default: the one OUT given)")
        p.add_argument("--assignment", choices=assignments.IDS, help="check that the shards graded this assignment")

        p = sub.add_parser("mutants", help="course staff: how many wrong versions of the reference the checks catch",
                           **_parser("Grade mutants of the staff solution's graded functions (one small change "
                                     "each) on their questions, and report which the checks catch.",
                                     EXAMPLES["mutants"]))
        p.add_argument("assignment", choices=assignments.IDS)
        p.add_argument("--question", help="only the functions this question's checks grade")
        p.add_argument("--per-function", type=int, default=6, metavar="N", help="mutants per graded function (default 6)")
        p.add_argument("--seed", type=int, default=0, help="which mutants are sampled (default 0)")
        p.add_argument("--out", type=Path, metavar="DIR", help="default: mutants/<assignment>")
        p.add_argument("--jobs", type=int, default=1, metavar="N", help="grade N mutants at a time")
        p.add_argument("--allow-unconfined", action="store_true", help="as for grade")

        sub.add_parser("selfcheck", help="build, then grade the staff solution and the starter of every finished assignment",
                       **_parser("Check generated files, then grade every finished assignment's staff "
                                 "solution (full marks) and starter (zero).", EXAMPLES["selfcheck"]))
    return parser


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # never die printing a student's odd character
        try:
            stream.reconfigure(errors="backslashreplace")
        except (AttributeError, ValueError):
            pass
    args = make_parser().parse_args(argv)
    try:
        return {"build": _build, "check": _check, "grade": _grade, "selfcheck": _selfcheck, "mutants": _mutants,
                "gradescope": _gradescope, "merge": _merge, "export": _export}[args.command](args)
    except (assignments.UnknownAssignment, ValueError) as exc:
        print(f"lmgrade: error: {results.clean(exc)}", file=sys.stderr)
        return 2
    except _Unconfined as exc:
        print(f"lmgrade: {exc}", file=sys.stderr)
        return 2
    except _loaded("autograder.authoring.build", "BuildError") as exc:
        print(f"lmgrade: build failed: {exc}", file=sys.stderr)
        return 1
    except _loaded("autograder.grading.batch", "Interrupted") as exc:
        print(f"lmgrade: {exc}", file=sys.stderr)
        return INTERRUPTED
    except GraderFault as exc:
        print(f"lmgrade: {results.clean(exc)}\nThis is the grader's setup, not the submission: nothing was "
              "recorded. Fix what it names (or tell the course staff) and run the same command again.", file=sys.stderr)
        return GRADER_FAULT
    except KeyboardInterrupt:
        print("lmgrade: interrupted", file=sys.stderr)
        return INTERRUPTED


_Unconfined = getattr(limits, "Unconfined", RuntimeError)


def _require_confinement(args) -> None:
    """Grading others' code unconfined would let it read the reference, hidden checks and test text:
    refuse unless the TA says --allow-unconfined."""
    if getattr(args, "allow_unconfined", False):
        return
    require = getattr(limits, "require_confinement", None)
    if require is not None:
        require(limits.Limits())  # raises limits.Unconfined with the reason and the way out
        return
    level = getattr(limits, "confinement", None)
    if level is not None and level(limits.Limits()) in ("none", False, None):
        raise _Unconfined("Refusing to grade: student code would run unconfined here (no Landlock, no worker "
                          "user), able to read the reference solutions, hidden checks and test text. Pass "
                          "--allow-unconfined if you trust every submission.")


def _build(args) -> int:
    from autograder.authoring import build
    if args.assignment and not args.student_bundle:
        raise ValueError("--assignment goes with --student-bundle")
    check = args.check or args.student_bundle is not None  # a bundle is made from the checkout, never writes it
    stale = build.build(check=check, solutions_dir=args.solutions)
    verb = "out of date" if check else "written"
    for path in stale:
        print(f"{verb}: {path.relative_to(assignments.ROOT) if path.is_relative_to(assignments.ROOT) else path}")
    if check and stale:
        print("Run `lmgrade build` and commit the result" + (", then make the bundle." if args.student_bundle else "."),
              file=sys.stderr)
        return 1
    if not stale:
        print("All generated files are up to date.")
    if args.student_bundle:
        from autograder.authoring import bundle
        chosen = [assignments.get(i) for i in dict.fromkeys(args.assignment)] if args.assignment else None
        try:
            written = bundle.write(args.student_bundle, chosen)
        except bundle.BundleError as exc:
            raise ValueError(str(exc)) from None
        print(bundle.closing_lines(args.student_bundle, written))
    return 0


def _export(args) -> int:
    from autograder.student import export
    try:
        written, how = export.export(args.notebook, args.output, html_only=args.html)
    except export.ExportError as exc:
        print(f"lmgrade: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {written}: {how}")
    return 0


def _gradescope(args) -> int:
    from autograder.grading import gradescope_zip
    assignment = assignments.get(args.assignment)
    out = gradescope_zip.build_zip(assignment, args.output or Path("build") / f"gradescope-{assignment.id}.zip",
                                   args.leaderboard)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): upload it as the autograder of `{assignment.id}`")
    from autograder.student import export
    written = out.with_name(f"{out.stem}-written-outline.md")
    written.write_text(export.outline(assignment))
    print(f"wrote {written}: the outline of the written questions, for the PDF assignment")
    print(gradescope_zip.settings_text(assignment.id))
    return 0


def _check(args) -> int:
    if not args.notebook.exists():
        raise ValueError(f"{args.notebook} does not exist (save the notebook first, and give its file name)")
    from autograder.student.notebook import infer_assignment, progress_line
    sub = extract.read_submission(args.notebook, analyse=False)  # bounded: a broken file gets one message, no traceback
    if sub.unreadable:
        print(f"{results.clean(args.notebook)}: nothing could be checked: {results.clean(sub.unreadable)}")
        return 0
    chosen = args.assignment or (sub.assignment if sub.assignment in assignments.IDS else None)
    assignment = assignments.get(chosen or infer_assignment(args.notebook))
    problem = sub.problem(assignment.id)
    if problem is not None:
        print(f"{results.clean(args.notebook)}: {problem[0]}: {results.clean(problem[1])}")
        return 0
    questions = set(args.question) if args.question else None
    print(progress_line(assignment.id, questions), flush=True)  # the worker takes seconds to answer
    runner.one_torch_thread(assignment)
    report = runner.grade(args.notebook, assignment, device="cpu", public_only=True, questions=questions)
    print(results.format_table(report, assignment.questions))
    print("These are the public checks only: hidden checks decide the final score.")
    return 0


def _grade(args) -> int:
    assignment = assignments.get(args.assignment)
    device = runner.resolve_device(args.device)
    if device.startswith("cuda:"):
        import torch
        if int(device.split(":")[1]) >= torch.cuda.device_count():
            raise ValueError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s) "
                             f"(cuda:0 to cuda:{torch.cuda.device_count() - 1}); use --device cuda or auto")
    if args.out is not None or any(p.is_dir() or p.suffix.lower() == ".zip" for p in args.submissions):
        return _grade_batch(args, assignment, device)
    if args.jobs != 1 or args.force or args.shard:
        raise ValueError("--jobs and --force are batch options: add --out DIR")
    if args.json and len(args.submissions) != 1:
        raise ValueError("--json writes one results file: give exactly one submission")
    missing = [str(p) for p in args.submissions if not p.is_file()]
    if missing:
        raise ValueError(f"no such submission file: {', '.join(missing)}")
    _require_confinement(args)
    runner.one_torch_thread(assignment)
    secrets = redaction.secret_lines(assignment)
    for path in args.submissions:
        shown = results.clean(path)
        try:
            problem = extract.read_submission(path, analyse=False).problem(assignment.id)
            if problem is not None:  # one clear message, not the same failure under every check
                if args.json:
                    results.write_json(results.problem_json(f"Nothing could be graded ({problem[0]}): {problem[1]}"),
                                       args.json)
                print(f"{assignment.id}: {shown}: {problem[0]}: 0/{_max_score(assignment):g}\n  {results.clean(problem[1])}")
                continue
            report = runner.grade(path, assignment, device=device,
                                  questions=set(args.question) if args.question else None)
            redaction.redact_report(results.sanitize(report), secrets, path)  # no text of the grader's files in feedback
        except GraderFault:
            raise  # no result at all, not a zero (main says why and exits 4)
        except Exception as exc:  # the grader itself failed: say so, and leave a valid results file
            message = results.clean(f"{type(exc).__name__}: {exc}")
            if args.json:
                results.write_json(results.failure_json(message), args.json)
            print(f"lmgrade: grading {shown} failed: {message}", file=sys.stderr)
            return 1
        if args.json:  # the results first: whatever printing does, they are there
            results.write_json(results.gradescope_json(report), args.json)
        print(results.format_table(report, assignment.questions))
    return 0


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def _max_score(assignment) -> float:
    return sum(fn.lmgrade_check.points for fn in assignment.checks() if not fn.lmgrade_check.extra)


def _grade_batch(args, assignment, device: str) -> int:
    """A folder, a Gradescope export or many files: grades.csv, feedback files, summary, histogram."""
    if args.out is None:
        raise ValueError("grading a folder or a .zip writes grades.csv and feedback files: add --out DIR")
    if args.json:
        raise ValueError("--json is for one submission; in batch mode feedback goes to --out DIR/feedback")
    if args.jobs < 1:
        raise ValueError("--jobs must be at least 1")
    missing = [str(p) for p in args.submissions if not p.exists()]
    if missing:
        raise ValueError(f"no such submission file or folder: {', '.join(missing)}")
    _require_confinement(args)
    from autograder.grading import batch
    signal.signal(signal.SIGTERM, _interrupt)  # `kill`, `timeout`, a scheduler: stop as cleanly as Ctrl-C
    result = batch.run(args.submissions, assignment, args.out, jobs=args.jobs, device=device,
                       questions=args.question, force=args.force, shard=args.shard)
    print(result.summary)
    if args.shard is None:
        print(f"wrote {args.out / 'grades.csv'}, {args.out / 'feedback'}/, {args.out / 'summary.txt'}, "
              f"{args.out / 'histogram.png'}, {args.out / 'report.html'} (the class report), "
              f"{args.out / 'leaderboard.csv'}")
    return _batch_status(result, "run the same command again to retry them")


def _mutants(args) -> int:
    """Mutation score of an assignment's checks; exit 1 while a mutant survives that staff did not accept."""
    from autograder.grading import mutants
    _require_confinement(args)
    assignment = assignments.get(args.assignment)
    out = args.out or Path("mutants") / assignment.id
    summary = mutants.run(assignment, out, question=args.question, per_function=args.per_function, jobs=args.jobs,
                          seed=args.seed)
    print(mutants.table(summary))
    for why in summary.baseline_problems.values():
        print(f"warning: {why}")
    survivors = [o.mutant.id for o in summary.outcomes if o.status == "survived"]
    print(f"{len(survivors)} survivor(s); report: {out / 'mutants.html'} ({summary.seconds / 60:.1f} min)")
    return 1 if survivors else 0


def _merge(args) -> int:
    """The shards' records as one batch; exit 3, with what is missing and how to finish it, rather
    than a grades.csv that silently lacks a shard's students."""
    from autograder.grading import shard
    try:
        result = shard.merge(args.outs, dest=args.out, assignment=assignments.get(args.assignment)
                             if args.assignment else None)
    except shard.Incomplete as exc:
        print(f"lmgrade: {results.clean(exc)}", file=sys.stderr)
        return shard.INCOMPLETE
    for note in result.notes:
        print(f"lmgrade: {note}", file=sys.stderr)
    dest = args.out or args.outs[0]
    print(result.summary)
    print(f"wrote {dest / 'grades.csv'}, {dest / 'feedback'}/, {dest / 'summary.txt'}, {dest / 'histogram.png'}, "
          f"{dest / 'report.html'}, {dest / 'leaderboard.csv'}")
    return _batch_status(result, "run their shard again to retry them, then merge again")


def _batch_status(result, retry: str) -> int:
    """1 when a submission could not be graded or an output could not be written, each said once."""
    status = 0
    if result.errors:
        print(f"lmgrade: {len(result.errors)} submission(s) could not be graded; {retry}", file=sys.stderr)
        status = 1
    if result.write_errors:
        print(f"lmgrade: {len(result.write_errors)} output file(s) could not be written (listed in the summary)",
              file=sys.stderr)
        status = 1
    return status


def _selfcheck(args) -> int:
    """The quick-start job: the staff solution must score full marks, the starter zero."""
    from autograder.authoring import build
    stale = build.build(check=True)  # the quick start never rewrites a committed file
    if stale:
        for path in stale:
            print(f"out of date: {path.relative_to(assignments.ROOT) if path.is_relative_to(assignments.ROOT) else path}")
        print("selfcheck: generated files are stale; run `lmgrade build` first (course staff editing a source)")
        return 1
    print("build: generated files up to date")
    finished = [a for a in assignments.available() if a.finished]
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="lmgrade-selfcheck-") as tmp:
        build.write_solution_notebooks(Path(tmp), finished)
        for assignment in finished:
            for label, path in (("staff solution", Path(tmp) / assignment.starter_path.name),
                                ("starter", assignment.starter_path)):
                report = runner.grade(path, assignment, device="cpu")
                print(results.format_table(report, assignment.questions, details=False))
                rows.append((assignment.id, label, report.score, report.max_score, report.execution_time))
                if label == "staff solution":  # every check passes, extra credit included
                    ok &= all(r.passed for r in report.results)
                else:
                    ok &= report.score == 0
    print("\nassignment   notebook         score        time")
    for assignment_id, label, score, max_score, seconds in rows:
        print(f"{assignment_id:<12} {label:<15} {score:>6g}/{max_score:<6g} {seconds:6.1f} s")
    print("selfcheck: " + ("OK (solutions full marks, starters zero)" if ok else "UNEXPECTED SCORES"))
    return 0 if ok else 1
