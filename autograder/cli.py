"""The `lmgrade` command: build, check (students), grade (TAs), selfcheck (the quick-start job).

Exit status: 0 whenever grading ran, whatever the score; 2 for wrong arguments; 1 when the grader
itself failed (with a message, and for `--json` a valid results file that says so).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from autograder import assignments, batch, build, results, runner


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmgrade", description="Homework and autograder for a course on language models.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("build", help="regenerate starter notebooks, reference modules and public fixtures")
    p.add_argument("--check", action="store_true", help="exit 1 if a committed generated file is stale")
    p.add_argument("--solutions", type=Path, metavar="DIR", help="also write the staff solution notebooks into DIR")
    p.add_argument("--student-bundle", type=Path, metavar="DIR",
                   help="also write what students download into DIR (starters, public checks, train/validation data)")
    p.add_argument("--assignment", action="append", choices=assignments.IDS,
                   help="with --student-bundle: bundle only this assignment (repeatable; default: every finished one)")

    p = sub.add_parser("gradescope", help="course staff: the Gradescope autograder")
    gs = p.add_subparsers(dest="gradescope_command", required=True)
    p = gs.add_parser("build", help="write the autograder zip to upload to Gradescope")
    p.add_argument("--assignment", required=True, choices=assignments.IDS)
    p.add_argument("--output", type=Path, metavar="ZIP", help="default: build/gradescope-<assignment>.zip")

    p = sub.add_parser("check", help="run the public checks on your notebook (what a student runs)")
    p.add_argument("notebook", type=Path)
    p.add_argument("--assignment", choices=assignments.IDS, help="default: read from the notebook")
    p.add_argument("--question", action="append", help="check only this question (repeatable)")

    p = sub.add_parser("grade", help="run every check on submissions (what a TA runs)")
    p.add_argument("submissions", nargs="+", type=Path)
    p.add_argument("--assignment", required=True, choices=assignments.IDS)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default: auto)")
    p.add_argument("--question", action="append",
                   help="grade only this question (repeatable); with --out: regrade it across the batch")
    p.add_argument("--json", type=Path, metavar="PATH", help="write Gradescope results.json here (one submission)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="batch mode: write grades.csv, feedback/, summary.txt and histogram.png into DIR")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="batch mode: grade N submissions at a time")
    p.add_argument("--force", action="store_true", help="batch mode: regrade submissions graded before")

    sub.add_parser("selfcheck", help="build, then grade the staff solution and the starter of every finished assignment")

    args = parser.parse_args(argv)
    try:
        return {"build": _build, "check": _check, "grade": _grade, "selfcheck": _selfcheck,
                "gradescope": _gradescope}[args.command](args)
    except (assignments.UnknownAssignment, ValueError) as exc:
        print(f"lmgrade: error: {exc}", file=sys.stderr)
        return 2
    except build.BuildError as exc:
        print(f"lmgrade: build failed: {exc}", file=sys.stderr)
        return 1


def _build(args) -> int:
    if args.assignment and not args.student_bundle:
        raise ValueError("--assignment goes with --student-bundle")
    stale = build.build(check=args.check, solutions_dir=args.solutions)
    verb = "out of date" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path.relative_to(assignments.ROOT) if path.is_relative_to(assignments.ROOT) else path}")
    if args.check and stale:
        print("Run `lmgrade build` and commit the result.", file=sys.stderr)
        return 1
    if not stale:
        print("All generated files are up to date.")
    if args.student_bundle:
        from autograder import bundle
        chosen = [assignments.get(i) for i in dict.fromkeys(args.assignment)] if args.assignment else None
        try:
            written = bundle.write(args.student_bundle, chosen)
        except bundle.BundleError as exc:
            raise ValueError(str(exc)) from None
        print(f"student bundle: {len(written)} files in {args.student_bundle} "
              f"(install: cd {args.student_bundle} && pip install -e .)")
    return 0


def _gradescope(args) -> int:
    from autograder import gradescope
    assignment = assignments.get(args.assignment)
    out = gradescope.build_zip(assignment, args.output or Path("build") / f"gradescope-{assignment.id}.zip")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): upload it as the autograder of `{assignment.id}` "
          "(Gradescope settings: see the README, section Gradescope)")
    return 0


def _check(args) -> int:
    if not args.notebook.exists():
        raise ValueError(f"{args.notebook} does not exist (save the notebook first, and give its file name)")
    from autograder.notebook import infer_assignment
    assignment = assignments.get(args.assignment or infer_assignment(args.notebook))
    report = runner.grade(args.notebook, assignment, device="cpu", public_only=True,
                          questions=set(args.question) if args.question else None)
    print(results.format_table(report, assignment.questions))
    print("These are the public checks only: hidden checks decide the final score.")
    return 0


def _grade(args) -> int:
    assignment = assignments.get(args.assignment)
    device = runner.resolve_device(args.device)
    if args.out is not None or any(p.is_dir() or p.suffix.lower() == ".zip" for p in args.submissions):
        return _grade_batch(args, assignment, device)
    if args.jobs != 1 or args.force:
        raise ValueError("--jobs and --force are batch options: add --out DIR")
    if args.json and len(args.submissions) != 1:
        raise ValueError("--json writes one results file: give exactly one submission")
    missing = [str(p) for p in args.submissions if not p.is_file()]
    if missing:
        raise ValueError(f"no such submission file: {', '.join(missing)}")
    secrets = batch.secret_lines(assignment)
    for path in args.submissions:
        try:
            report = runner.grade(path, assignment, device=device,
                                  questions=set(args.question) if args.question else None)
        except Exception as exc:  # the grader itself failed: say so, and leave a valid results file
            if args.json:
                results.write_json(results.failure_json(f"{type(exc).__name__}: {exc}"), args.json)
            print(f"lmgrade: grading {path} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        batch.redact_report(report, secrets, path)  # no text of the grader's files in feedback
        print(results.format_table(report, assignment.questions))
        if args.json:
            results.write_json(results.gradescope_json(report), args.json)
    return 0


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
    result = batch.run(args.submissions, assignment, args.out, jobs=args.jobs, device=device,
                       questions=args.question, force=args.force)
    print(result.summary)
    print(f"wrote {args.out / 'grades.csv'}, {args.out / 'feedback'}/, {args.out / 'summary.txt'}, "
          f"{args.out / 'histogram.png'}")
    if result.errors:
        print(f"lmgrade: {len(result.errors)} submission(s) could not be graded; run the same command again "
              "to retry them", file=sys.stderr)
        return 1
    return 0


def _selfcheck(args) -> int:
    """The quick-start job: the staff solution must score full marks, the starter zero."""
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
        build.build(solutions_dir=Path(tmp), assignments=finished)
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
