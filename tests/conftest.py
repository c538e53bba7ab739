"""Fixtures shared by test modules."""
import pytest


@pytest.fixture
def policy_off(monkeypatch):
    """Grade code outside the graded-code subset as if it were inside it.

    Why: the policy refuses reflection, `os`, `sys` and patching before anything runs; tests of the
    layers beneath it (worker limits, confinement, what crosses the wire) still need hostile code to
    run, so that each layer holds on its own. `tests/test_policy.py` tests the policy itself.
    """
    from autograder import policy
    monkeypatch.setattr(policy, "refused", lambda cells, assignment: {})
