"""The backprop grader catches realistic bugs with exactly the checks meant for them, and accepts
correct code written differently.

Each variant is the staff solution with one edit, as a student might make it. The expected set of
failing checks is the bug's own checks plus the checks of code that calls the buggy function (the
language model of Q4 and the training of Q6 are built from the Q1-Q3 functions), and nothing else.
The Shakespeare training run (`shakespeare_ffnn`, about 15 s) is left out here except in the two
tests that are about it.
"""
import dataclasses

import pytest

from autograder import assignments, runner
from tests.helpers import edited_solution

BACKPROP = assignments.get("backprop")
SLOW = "shakespeare_ffnn"
FFNN_GRADS = {"public_ffnn", "ffnn_grads_hidden", "ffnn_fd_hidden"}


@dataclasses.dataclass
class WithoutTraining(assignments.Assignment):
    """The backprop assignment minus its one slow check."""

    def checks(self, public_only: bool = False) -> list:
        return [fn for fn in super().checks(public_only) if fn.__name__ != SLOW]


FAST = WithoutTraining(BACKPROP.id, BACKPROP.root)

BUGS = {
    "softmax without subtracting the max": (
        [("    exp = np.exp(z - z.max(axis=-1, keepdims=True))", "    exp = np.exp(z)")],
        {"softmax_stable", "ce_grad_hidden"}),  # cross_entropy_grad calls softmax on logits of +-1000
    "log_softmax as the log of softmax": (
        [("    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))", "    return np.log(softmax(z))")],
        {"softmax_stable"}),
    "cross_entropy sums over the batch instead of averaging": (
        [("return float(-logp[np.arange(len(targets)), targets].mean())",
          "return float(-logp[np.arange(len(targets)), targets].sum())")],
        {"public_softmax", "cross_entropy_hidden", "softmax_stable", "public_train"} | FFNN_GRADS),
    "log-softmax Jacobian transposed": (
        [("    return np.eye(len(p)) - p[None, :]", "    return np.eye(len(p)) - p[:, None]")],
        {"public_primer", "jacobians_hidden"}),
    "cross_entropy_grad sums where the loss averages": (
        [("    return grad / B", "    return grad")],
        {"public_primer", "ce_grad_hidden", "public_train"} | FFNN_GRADS),
    "bias gradient not summed over the batch": (
        [("    db = dout.sum(axis=0)", "    db = dout")],
        {"public_layers", "linear_hidden", "public_train"} | FFNN_GRADS),
    "weight gradient transposed": (
        [("    dW = dout.T @ x", "    dW = x.T @ dout")],
        {"public_layers", "linear_hidden", "public_train"} | FFNN_GRADS),
    "tanh derivative 1 - h instead of 1 - h**2": (
        [("    return dout * (1.0 - h ** 2)", "    return dout * (1.0 - h)")],
        {"public_layers", "tanh_hidden"} | FFNN_GRADS),
    "embedding backward assigns instead of accumulating": (
        [("    np.add.at(dE, ids, dout)", "    dE[ids] = dout")],
        {"public_layers", "embedding_hidden"} | FFNN_GRADS),
    "gradient checker with a one-sided difference and a large step": (
        [("eps: float = 1e-6) -> np.ndarray:", "eps: float = 1e-2) -> np.ndarray:"),
         ("eps: float = 1e-6, tol: float = 1e-6):", "eps: float = 1e-2, tol: float = 1e-6):"),
         ("        flat_x[i] = old - eps\n        f_minus = f(x)\n        flat_x[i] = old\n"
          "        flat_grad[i] = (f_plus - f_minus) / (2 * eps)",
          "        flat_x[i] = old\n        flat_grad[i] = (f_plus - f(x)) / eps")],
        {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}),
    "gradient_check passes when the error is large": (
        [("    return bool(error <= tol), error", "    return bool(error >= tol), error")],
        {"public_gradcheck", "gradient_check_hidden"}),
    "SGD step with the wrong sign": (
        [("            params[name] -= lr * grads[name]", "            params[name] += lr * grads[name]")],
        {"public_train"}),
}

CORRECT = {
    "linear_backward with einsum": [
        ("    dx = dout @ W\n    dW = dout.T @ x\n    db = dout.sum(axis=0)\n",
         "    dx = np.einsum('bo,oi->bi', dout, W)\n    dW = np.einsum('bo,bi->oi', dout, x)\n"
         "    db = np.einsum('bo->o', dout)\n")],
    "embedding_backward with a loop over positions": [
        ("    np.add.at(dE, ids, dout)\n",
         "    for position, word in np.ndenumerate(ids):\n        dE[word] += dout[position]\n")],
    "Jacobians with explicit loops, gradient with a one-hot matrix": [
        ("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)\n",
         "    p = softmax(z)\n    J = np.zeros((len(p), len(p)))\n    for i in range(len(p)):\n"
         "        for j in range(len(p)):\n            J[i, j] = p[i] * ((i == j) - p[j])\n    return J\n"),
        ("    B = logits.shape[0]\n    grad = softmax(logits)\n    grad[np.arange(B), targets] -= 1.0\n    return grad / B\n",
         "    onehot = np.eye(logits.shape[1])[targets]\n    return (softmax(logits) - onehot) / len(targets)\n")],
    "log_softmax through a logsumexp, cross_entropy by a loop": [
        ("    shifted = z - z.max(axis=-1, keepdims=True)\n"
         "    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))\n",
         "    m = np.max(z, axis=-1, keepdims=True)\n    return z - (m + np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))\n"),
        ("    return float(-logp[np.arange(len(targets)), targets].mean())\n",
         "    total = 0.0\n    for row, target in zip(logp, targets):\n        total -= row[target]\n"
         "    return total / len(targets)\n")],
    "gradient checking with copies, numpy scalars and a numpy bool": [
        ("    x = np.array(x, dtype=np.float64)  # a copy we may change\n    grad = np.zeros_like(x)\n"
         "    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views\n    for i in range(flat_x.size):\n"
         "        old = flat_x[i]\n        flat_x[i] = old + eps\n        f_plus = f(x)\n        flat_x[i] = old - eps\n"
         "        f_minus = f(x)\n        flat_x[i] = old\n        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n",
         "    x = np.asarray(x, dtype=np.float64)\n    grad = np.zeros(x.shape)\n    for index in np.ndindex(x.shape):\n"
         "        step = np.zeros(x.shape)\n        step[index] = eps\n"
         "        grad[index] = (f(x + step) - f(x - step)) / (2 * eps)\n"),
        ("    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1e-12))",
         "    return np.sqrt(np.sum((a - b) ** 2)) / np.maximum(np.sqrt(np.sum(a * a)) + np.sqrt(np.sum(b * b)), 1e-12)"),
        ("    return bool(error <= tol), error", "    return error <= tol, error")],
}


def edited(replacements) -> str:
    return edited_solution("backprop", replacements)


def failing_checks(tmp_path, text, assignment=FAST, questions=None) -> set[str]:
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, assignment, questions=questions)
    assert report.results, "no checks ran"
    assert not any("grader could not finish" in r.output for r in report.results)
    return {r.name for r in report.results if not r.passed}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, expected = BUGS[bug]
    assert failing_checks(tmp_path, edited(replacements)) == expected


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    assert failing_checks(tmp_path, edited(CORRECT[variant])) == set()


def test_wrong_sign_sgd_fails_the_shakespeare_threshold(tmp_path):
    text = edited(BUGS["SGD step with the wrong sign"][0])
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, BACKPROP, questions={"6"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert set(failed) == {"public_train", SLOW}
    assert "diverged" in failed[SLOW] or "threshold" in failed[SLOW]


def test_training_on_shuffled_epochs_passes_the_threshold(tmp_path):
    """Another correct way to draw minibatches uses the randomness differently: within the margin."""
    text = edited([
        ("    rng = np.random.default_rng(seed + 1)\n",
         "    rng = np.random.default_rng(seed + 1)\n    order, at = rng.permutation(len(targets)), 0\n"),
        ("        batch = rng.integers(0, len(targets), size=batch_size)\n",
         "        if at + batch_size > len(order):\n            order, at = rng.permutation(len(targets)), 0\n"
         "        batch, at = order[at:at + batch_size], at + batch_size\n")])
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, BACKPROP, questions={"6"})
    assert {r.name: r.passed for r in report.results} == {"public_train": True, "windows_hidden": True, SLOW: True}
    assert "threshold" in next(r.output for r in report.results if r.name == SLOW)
