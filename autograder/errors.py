"""The one exception a check raises to fail with a message for the student, and the one the grader
raises when a grading could not be completed on its own side."""


class CheckFailed(AssertionError):
    """A check did not pass; `str(exc)` is shown to the student, so it must teach, not leak."""


class GraderFault(RuntimeError):
    """Grading could not be completed for a reason on the grader's side (a worker that could not
    start, a check that crashed): this run gives the submission no score. A batch records an
    error (after one retry), `lmgrade` exits 4, Gradescope's run says the autograder failed."""
