"""The one exception a check raises to fail with a message for the student."""


class CheckFailed(AssertionError):
    """A check did not pass; `str(exc)` is shown to the student, so it must teach, not leak."""
