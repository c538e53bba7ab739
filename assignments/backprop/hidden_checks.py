"""Hidden checks for `backprop`. Never shipped to students.

Every gradient is checked three ways: against torch autograd of the same expression in float64
(rtol 1e-7), against finite differences (of the student's own forward where it is in the same
question, so forward and backward must agree, else of the grader's), and on one small case whose
answer is written out below, so that code returning zeros everywhere cannot pass a
self-consistency test. Dimensions are always distinct (B != V != H != d) so transposes cannot hide.
Only the student's numpy code runs in the worker; torch runs here, in the trusted process.

Beyond values, every graded function is called through `call_pure` (its arguments must come back
unchanged), returns float64 for float64 inputs, and meets logits of +-1000 wherever a softmax is
inside. The gradient checker is compared with the grader's own central differences at the step it
was asked to use (never with the exact gradient, which a student could dig out of the function it is
handed), and training is checked step by step before the perplexity threshold.
"""
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checking import properties
from autograder.checking.checks import check
from autograder.checking.compare import as_array, as_bool, assert_close, assert_finite, assert_shape, parts
from autograder.checking.gradients import assert_gradient, finite_difference
from autograder.checking.properties import spans
from autograder.checking.provenance import assert_descends, start_profile
from autograder.checking.purity import assert_global_generators_untouched, call_pure, call_twice
from autograder.checking.reference_results import reference_result
from autograder.errors import CheckFailed
from autograder.sandbox.support import SmoothFunction, word_ids, word_vocab

PARAM_NAMES = ("E", "W", "b", "U", "b2")
FD_TOL = dict(rtol=1e-5, atol=1e-8)  # finite differences with eps 1e-6 in float64 are good to ~1e-9
# Q5: a student's central difference against the grader's at the same step. At eps 1e-6 both are
# rounding-limited (~1e-9 apart at most); at eps 1e-2 they agree to ~1e-13 while the exact
# gradient is ~1e-5 away (measured on SmoothFunction: 1.2e-5 to 3.1e-5 relative).
SAME_STEP_TOL = {1e-6: dict(rtol=1e-7, atol=1e-8), 1e-3: dict(rtol=1e-9, atol=1e-11), 1e-2: dict(rtol=1e-9, atol=1e-11)}
# Q6: the graded training run. About 10 s of one CPU core; the threshold is the reference's
# perplexity with the same settings and seed 2024 plus PPL_MARGIN (bench/backprop_thresholds.py);
# a submission trains from a start the grader draws with a secret seed, and with a secret batch seed.
VOCAB_SIZE = 2000
TRAIN_SETTINGS = dict(context=2, dim=32, hidden=64, lr=2.0, batch_size=128, steps=2000, seed=2024)
PPL_MARGIN = 0.08
# provenance (bench/backprop_thresholds.py): E, W and U must keep this share of the correlation with
# the grader's start that the reference's threshold run keeps with its own, each at least START_LEAST
# and START_MEAN on average (correct runs from other seeds keep 0.98-1.02 of it, weights trained from
# another start about 0, and blends of such weights with the start that keep enough cost 11% or more
# perplexity). The start is drawn here, never by the student's init_params. The trace is weighted by
# how much each entry can move the logits (`ffnn_relevance`): with it the reference from four other
# seeds and shuffled epochs keep 1.00-1.04, and a smaller model trained at home whose unused units and
# dimensions hold 10 or 30 times the start keeps about 0 (it kept 0.78-0.96 unweighted).
# Tighter than rnn_lm's: the perplexity is judged first, so a buggy run (a tanh derivative of 1 - h
# keeps 0.64-0.85) hears about its perplexity, never about its start.
START_LEAST, START_MEAN = 0.8, 0.9
# Below FLOOR_RATIO times the reference no honest run lands (correct variants: 0.99-1.04x) while a
# model trained on the test plays themselves lands at 0.85-0.88x (bench/backprop_thresholds.py).
FLOOR_RATIO = 0.93
EVAL_EVERY = 3  # score every third position of the test plays (35k of 106k): a third of the time, same figure
Q1 = ("softmax", "log_softmax", "cross_entropy")
Q2 = ("softmax_jacobian", "log_softmax_jacobian", "grad_logits_chain", "cross_entropy_grad")
Q3 = ("linear_forward", "linear_backward", "tanh_forward", "tanh_backward", "embedding_forward", "embedding_backward")
FORWARD = ("embedding_forward", "linear_forward", "tanh_forward")


# ---- helpers --------------------------------------------------------------------------------
def param_dict(value, what: str) -> dict:
    if not isinstance(value, dict) or set(value) != set(PARAM_NAMES):
        keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise CheckFailed(f"{what}: expected a dict with keys {list(PARAM_NAMES)}, got {keys}")
    return value


def scalar(value, what: str) -> float:
    arr = as_array(value, what)[0]
    if arr.shape != ():
        raise CheckFailed(f"{what}: expected a single number, got an array of shape {arr.shape}")
    return float(arr)


def float64(value, what: str):
    """float64 in, float64 out: the notebook's rules fix it, and a lower precision hides in tolerances."""
    _, dtype = as_array(value, what)
    if dtype != "float64":
        raise CheckFailed(f"{what}: returned {dtype}, expected float64 (numpy's default, which the notebook asks "
                          "for throughout). Computed in lower precision, or built from an integer array "
                          "(np.zeros_like of int ids)?")
    return value


def pure(t, name: str, *args, what: str, **kwargs):
    """The student's `name` called on arguments held in the worker, which must come back unchanged; then the
    matrix's `generator` property of the same call (no function here needs the global generators: a
    `np.random.seed(0)` or `random.seed` left in a softmax or a gradient checker moves them for everyone)."""
    result = call_pure(getattr(t.student, name), *args, what=what, **kwargs)
    if name != "train_ffnn":  # train_steps_hidden checks its generators, with a training loop's advice
        label = what[len(name) + 1:-1] if what.startswith(name + "(") and what.endswith(")") else what
        properties.run_generator(t, name, getattr(t.student, name), label, args, kwargs)
    return result


def tt(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a, dtype=np.float64))


def autograd(fn, inputs: list, cotangent=None) -> tuple[np.ndarray, list[np.ndarray]]:
    """fn's output and the gradients of sum(output * cotangent) (or of the scalar output) in float64."""
    leaves = [tt(x).requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    total = out if cotangent is None else (out * tt(cotangent)).sum()
    grads = torch.autograd.grad(total, leaves, allow_unused=True)
    return out.detach().numpy(), [np.zeros_like(x, dtype=np.float64) if g is None else g.numpy()
                                  for g, x in zip(grads, inputs)]


def fd_of_student(fn, args: list, i: int, cotangent=None) -> np.ndarray:
    """Central differences of the student's fn w.r.t. args[i], in one round trip.

    The scalar is sum(output * cotangent), or the output itself without a cotangent."""
    def batch(points):
        outs = fn.map([tuple(p if j == i else a for j, a in enumerate(args)) for p in points])
        values = []
        for out in outs:
            arr = as_array(out)[0].astype(np.float64)
            if cotangent is None:
                values.append(scalar(arr, "the function"))
            elif arr.shape != cotangent.shape:
                raise CheckFailed(f"the forward returned shape {arr.shape}, expected {cotangent.shape}")
            else:
                values.append(float(np.sum(arr * cotangent)))
        return values

    return finite_difference(None, np.asarray(args[i], dtype=np.float64), batch=batch)


def random_params(rng, V, d, H, k) -> dict:
    return {"E": rng.normal(size=(V, d)), "W": rng.normal(size=(H, k * d)) / math.sqrt(k * d),
            "b": 0.3 * rng.normal(size=H), "U": rng.normal(size=(V, H)), "b2": 0.3 * rng.normal(size=V)}


def torch_logits(E, W, b, U, b2, contexts) -> torch.Tensor:
    e = E[torch.as_tensor(contexts)].reshape(len(contexts), -1)
    return torch.tanh(e @ W.T + b) @ U.T + b2


def torch_ffnn(params: dict, contexts, targets):
    """Logits, loss and every parameter's gradient of the feedforward LM by torch autograd."""
    leaves = {n: tt(params[n]).requires_grad_(True) for n in PARAM_NAMES}
    logits = torch_logits(*(leaves[n] for n in PARAM_NAMES), contexts)
    loss = F.cross_entropy(logits, torch.as_tensor(targets))
    grads = torch.autograd.grad(loss, [leaves[n] for n in PARAM_NAMES])
    return logits.detach().numpy(), loss.item(), {n: g.numpy() for n, g in zip(PARAM_NAMES, grads)}


def contexts_with_repeats(rng, B, k, V) -> np.ndarray:
    """(B, k) ids where some id occurs several times, also within one row."""
    contexts = rng.integers(0, V, size=(B, k))
    contexts[0, :] = 3
    if B > 1:
        contexts[-1, 0] = 3
    return contexts


# ---- Q1 -------------------------------------------------------------------------------------
@check(1, 1, "softmax and log_softmax on random logits of several shapes (also V = 1): float64, inputs unchanged",
       uses=("softmax", "log_softmax"),
       hint="work along the last axis with keepdims=True, and on a new array: z -= z.max(...) changes the "
            "caller's logits.")
def softmax_hidden(t):
    for shape in [(7,), (5, 7), (2, 3, 7), (1, 4), (3, 1)]:
        z = 3 * t.rng.normal(size=shape)
        for name, expected in (("softmax", torch.softmax(tt(z), -1)), ("log_softmax", torch.log_softmax(tt(z), -1))):
            what = f"{name}(z {shape})"
            got = float64(pure(t, name, z, what=what), what)
            assert_close(got, expected.numpy(), what)


@check(1, 1, "cross_entropy is the batch mean (batch 1 and 6, repeated targets, 100 classes, logits of +-1000), a "
             "float64 number, inputs unchanged", uses=("cross_entropy",),
       hint="the loss is the MEAN over the batch of -log softmax(logits[b])[targets[b]], from log_softmax (never "
            "log(softmax(...)), which is log(0) for large logits).")
def cross_entropy_hidden(t):
    for B, V in ((1, 9), (6, 9), (3, 100)):  # V = 100: a real vocabulary's size (np.choose stops at 64 classes)
        logits, targets = 2 * t.rng.normal(size=(B, V)), t.rng.integers(0, V, size=B)
        targets[-1] = targets[0]
        expected = float(F.cross_entropy(tt(logits), torch.as_tensor(targets)))
        what = f"cross_entropy(logits ({B}, {V}), targets ({B},))"
        got = scalar(float64(pure(t, "cross_entropy", logits, targets, what=what), what), what)
        assert_close(got, expected, what)
    z = np.array([[1000.0, 0.0, -1000.0, 999.0, 5.0], [-1000.0, -1000.0, -999.0, -1000.0, -1002.0],
                  [-1000.0, 1000.0, 0.0, -500.0, 700.0]])  # (3, 5)
    targets = np.array([2, 4, 0])
    what = "cross_entropy(logits of +-1000 (3, 5), targets)"
    got = scalar(t.student.cross_entropy(z, targets), what)
    assert_finite(got, what)
    assert_close(got, float(F.cross_entropy(tt(z), torch.as_tensor(targets))), what)


@check(1, 2, "softmax and log_softmax stable for logits of +-1000 (2-D and 3-D): no NaN, no inf, correct values",
       uses=("softmax", "log_softmax"),
       hint="subtract each row's maximum before np.exp; compute log_softmax as (z - max) - log(sum(exp(z - max))), "
            "never as log(softmax(z)).")
def softmax_stable(t):
    z = np.array([[1000.0, 0.0, -1000.0, 999.0, 5.0], [-1000.0, -1000.0, -999.0, -1000.0, -1002.0],
                  [1000.0, 1000.0, 1000.0, 1000.0, 1000.0], [-1000.0, 1000.0, 0.0, -500.0, 700.0]])  # (4, 5)
    z = np.concatenate([z, 1000 * t.rng.normal(size=(2, 5))])  # (6, 5)
    for name, expected in (("softmax", torch.softmax(tt(z), -1)), ("log_softmax", torch.log_softmax(tt(z), -1))):
        got = getattr(t.student, name)(z)
        assert_finite(got, f"{name}(logits of +-1000 (6, 5))")
        assert_close(got, expected.numpy(), f"{name}(logits of +-1000 (6, 5))")
    shifted = 1000 + t.rng.normal(size=(2, 3, 4))  # (2, 3, 4): every logit near 1000
    for name, expected in (("softmax", torch.softmax(tt(shifted), -1)),
                           ("log_softmax", torch.log_softmax(tt(shifted), -1))):
        got = getattr(t.student, name)(shifted)
        assert_finite(got, f"{name}(logits near 1000 (2, 3, 4))")
        assert_close(got, expected.numpy(), f"{name}(logits near 1000 (2, 3, 4))")


# ---- Q2 -------------------------------------------------------------------------------------
THIRDS = np.log([1.0, 2.0, 3.0])  # softmax(THIRDS) = [1/6, 1/3, 1/2]
BIG = np.array([1000.0, 0.0, -1000.0, 999.0])  # softmax: [1/(1+e^-1), 0, 0, e^-1/(1+e^-1)]


def np_log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def fd_jacobian(fn, z: np.ndarray) -> np.ndarray:
    """J[i, j] = d fn(z)_i / d z_j by central differences of the grader's own fn."""
    return np.stack([finite_difference(lambda v, i=i: fn(v)[i], z) for i in range(len(z))])


@check(2, 2, "softmax and log-softmax Jacobians against autograd and finite differences, and a case worked by hand",
       uses=("softmax_jacobian", "log_softmax_jacobian"), needs=("softmax", "log_softmax"),
       hint="J[i, j] = d(output i) / d z_j: row i belongs to output i. Every row of the log-softmax Jacobian "
            "is e_i - p, so it is not symmetric: check which axis your broadcast runs along.")
def jacobians_hidden(t):
    for V in (7, 3):
        z = 2 * t.rng.normal(size=V)
        expected = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), tt(z)).numpy()
        what = f"softmax_jacobian(z ({V},))"
        got = float64(pure(t, "softmax_jacobian", z, what=what), what)
        assert_gradient(got, expected, what)
        assert_close(got, fd_jacobian(lambda v: np.exp(np_log_softmax(v)), z),
                     f"softmax_jacobian(z ({V},)) against finite differences", **FD_TOL)
        expected = torch.autograd.functional.jacobian(lambda v: torch.log_softmax(v, -1), tt(z)).numpy()
        what = f"log_softmax_jacobian(z ({V},))"
        got = float64(pure(t, "log_softmax_jacobian", z, what=what), what)
        assert_gradient(got, expected, what)
        assert_close(got, fd_jacobian(np_log_softmax, z), f"log_softmax_jacobian(z ({V},)) against finite differences",
                     **FD_TOL)
    by_hand = np.array([[5 / 36, -1 / 18, -1 / 12], [-1 / 18, 2 / 9, -1 / 6], [-1 / 12, -1 / 6, 1 / 4]])
    assert_gradient(t.student.softmax_jacobian(THIRDS), by_hand, "softmax_jacobian(log([1, 2, 3]))")
    by_hand = np.array([[5 / 6, -1 / 3, -1 / 2], [-1 / 6, 2 / 3, -1 / 2], [-1 / 6, -1 / 3, 1 / 2]])
    assert_gradient(t.student.log_softmax_jacobian(THIRDS), by_hand, "log_softmax_jacobian(log([1, 2, 3]))")


@check(2, 1, "grad_logits_chain: one-hot and soft targets against autograd, inputs unchanged",
       uses=("grad_logits_chain",), needs=("softmax",),
       hint="dL/dp = -y / p, then the TRANSPOSED softmax Jacobian times it.")
def chain_hidden(t):
    V = 7
    for kind in ("one-hot", "soft"):
        z = 1.5 * t.rng.normal(size=V)
        y = np.eye(V)[int(t.rng.integers(V))] if kind == "one-hot" else t.rng.dirichlet(np.ones(V))
        _, (expected,) = autograd(lambda v: -(tt(y) * torch.log_softmax(v, -1)).sum(), [z])
        what = f"grad_logits_chain(z ({V},), {kind} y ({V},))"
        got = float64(pure(t, "grad_logits_chain", z, y, what=what), what)
        assert_gradient(got, expected, what)
        assert_close(got, finite_difference(lambda v, y=y: -(y * np_log_softmax(v)).sum(), z),
                     f"{what} against finite differences of the loss", **FD_TOL)
    assert_gradient(t.student.grad_logits_chain(THIRDS, np.array([0.0, 0.0, 1.0])), np.array([1 / 6, 1 / 3, -1 / 2]),
                    "grad_logits_chain(log([1, 2, 3]), [0, 0, 1])")


@check(2, 2, "cross_entropy_grad: autograd, finite differences, batch 1 and 6, repeated targets, inputs unchanged",
       uses=("cross_entropy_grad",), needs=("softmax",),
       hint="the loss is a batch mean, so the gradient is (softmax - one-hot) / B; subtract the one-hot from a "
            "new array, not from the caller's logits.")
def ce_grad_hidden(t):
    for B in (1, 6):
        logits, targets = 2 * t.rng.normal(size=(B, 9)), t.rng.integers(0, 9, size=B)
        targets[-1] = targets[0]
        what = f"cross_entropy_grad(logits ({B}, 9), targets ({B},))"
        got = float64(pure(t, "cross_entropy_grad", logits, targets, what=what), what)
        _, (expected,) = autograd(lambda v: F.cross_entropy(v, torch.as_tensor(targets)), [logits])
        assert_gradient(got, expected, what)

        def loss(v, targets=targets):
            return -np_log_softmax(v)[np.arange(len(targets)), targets].mean()

        assert_close(got, finite_difference(loss, logits), f"{what} against finite differences of the loss", **FD_TOL)
    logits = np.array([THIRDS, THIRDS[::-1]])
    assert_gradient(t.student.cross_entropy_grad(logits, np.array([2, 2])),
                    np.array([[1 / 12, 1 / 6, -1 / 4], [1 / 4, 1 / 6, -5 / 12]]),
                    "cross_entropy_grad(log([[1, 2, 3], [3, 2, 1]]), [2, 2])")


@check(2, 1, "every Q2 function at logits of +-1000 (and near 1000; a batch whose rows' maxima differ by 750 and "
             "more): finite and right", uses=Q2, needs=("softmax", "log_softmax"),
       hint="a softmax inside must subtract each row's own maximum first (axis=-1, keepdims=True): reuse your stable "
            "softmax instead of np.exp(z).")
def primer_stable(t):
    for name, fn in (("softmax_jacobian", lambda v: torch.softmax(v, -1)),
                     ("log_softmax_jacobian", lambda v: torch.log_softmax(v, -1))):
        what = f"{name}(logits [1000, 0, -1000, 999])"
        got = getattr(t.student, name)(BIG)
        assert_finite(got, what)
        assert_gradient(got, torch.autograd.functional.jacobian(fn, tt(BIG)).numpy(), what)
    z, y = 1000 + 1.5 * t.rng.normal(size=7), t.rng.dirichlet(np.ones(7))  # -y / p needs every p > 0
    _, (expected,) = autograd(lambda v: -(tt(y) * torch.log_softmax(v, -1)).sum(), [z])
    what = "grad_logits_chain(z (7,) near 1000, soft y (7,))"
    got = t.student.grad_logits_chain(z, y)
    assert_finite(got, what)
    assert_gradient(got, expected, what)
    # rows whose maxima lie 750 and 2000 below the others': a softmax shifted by the batch's one maximum
    # (z - z.max(), no axis) is e**-750 = 0 in every entry of those rows, so 0 / 0
    z = np.array([[1000.0, 0.0, -1000.0, 999.0], [-1000.0, -1000.0, -998.0, 1000.0], [5.0, 1000.0, -1000.0, 0.0],
                  [250.0, -1000.0, 249.0, 0.0], [-1001.0, -1000.0, -1002.0, -1003.0]])  # (5, 4)
    targets = np.array([2, 0, 1, 2, 3])
    what = "cross_entropy_grad(logits of +-1000 (5, 4) whose rows' maxima differ by up to 2000, targets)"
    got = t.student.cross_entropy_grad(z, targets)
    assert_finite(got, what)
    _, (expected,) = autograd(lambda v: F.cross_entropy(v, torch.as_tensor(targets)), [z])
    assert_gradient(got, expected, what)


# ---- Q3 -------------------------------------------------------------------------------------
@check(3, 2, "linear forward and backward (batch 1 and 5, non-square W, one output unit): autograd, finite "
             "differences, by hand", uses=("linear_forward", "linear_backward"),
       hint="dx = dout @ W, dW = dout.T @ x (the shape of W), db = dout summed over the batch (axis 0), shape "
            "(d_out,) also when d_out = 1.")
def linear_hidden(t):
    d_in = 7
    for B, d_out in ((1, 4), (5, 4), (3, 1)):  # d_out = 1: db keeps its axis (np.squeeze makes it a scalar)
        x, W, b = t.rng.normal(size=(B, d_in)), t.rng.normal(size=(d_out, d_in)), t.rng.normal(size=d_out)
        dout = t.rng.normal(size=(B, d_out))
        expected_out, expected = autograd(lambda x, W, b: x @ W.T + b, [x, W, b], dout)
        shapes = f"x ({B}, {d_in}), W ({d_out}, {d_in}), b ({d_out},)"
        what = f"linear_forward({shapes})"
        assert_close(float64(pure(t, "linear_forward", x, W, b, what=what), what), expected_out, what)
        what = f"linear_backward(dout ({B}, {d_out}), x ({B}, {d_in}), W ({d_out}, {d_in}))"
        got = parts(pure(t, "linear_backward", dout, x, W, what=what), 3, what)
        for name, g, e in zip(("dx", "dW", "db"), got, expected):
            assert_gradient(float64(g, f"{what}: {name}"), e, f"{what}: {name}")
        for i, name in enumerate(("dx", "dW", "db")):
            numeric = fd_of_student(t.student.linear_forward, [x, W, b], i, dout)
            assert_close(got[i], numeric, f"{what}: {name} against finite differences of your linear_forward", **FD_TOL)
    x, W = np.array([[1.0, 2.0, 3.0], [0.0, 1.0, -1.0]]), np.array([[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]])
    dout = np.array([[1.0, -2.0], [3.0, 0.5]])
    what = "linear_backward([[1, -2], [3, 0.5]], [[1, 2, 3], [0, 1, -1]], [[1, 0, -1], [2, 1, 0]])"
    got = parts(t.student.linear_backward(dout, x, W), 3, what)
    by_hand = [np.array([[-3.0, -2.0, -1.0], [4.0, 0.5, -3.0]]), np.array([[1.0, 5.0, 0.0], [-2.0, -3.5, -6.5]]),
               np.array([4.0, -1.5])]
    for name, g, e in zip(("dx", "dW", "db"), got, by_hand):
        assert_gradient(g, e, f"{what}: {name}")


@check(3, 1, "tanh forward (also at +-1000) and backward from the output h: autograd, finite differences, by hand, "
             "inputs unchanged", uses=("tanh_forward", "tanh_backward"),
       hint="d tanh(a) / da = 1 - tanh(a)**2 = 1 - h**2, with h the forward's output; return a new array "
            "(dout *= ... changes the caller's gradient). np.tanh never overflows; (e^a - e^-a) / (e^a + e^-a) does.")
def tanh_hidden(t):
    a, dout = 1.5 * t.rng.normal(size=(5, 3)), t.rng.normal(size=(5, 3))
    expected_h, (expected,) = autograd(torch.tanh, [a], dout)
    what = "tanh_forward(a (5, 3))"
    assert_close(float64(pure(t, "tanh_forward", a, what=what), what), expected_h, what)
    what = "tanh_backward(dout (5, 3), h (5, 3))"
    got = float64(pure(t, "tanh_backward", dout, np.tanh(a), what=what), what)
    assert_gradient(got, expected, what)
    assert_close(got, fd_of_student(t.student.tanh_forward, [a], 0, dout),
                 "tanh_backward(dout, h) against finite differences of your tanh_forward", **FD_TOL)
    assert_gradient(t.student.tanh_backward(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, -0.8])),
                    np.array([1.0, 1.5, 1.08]), "tanh_backward([1, 2, 3], h=[0, 0.5, -0.8])")
    big = np.array([[-1000.0, -30.0, 0.0], [0.5, 30.0, 1000.0]])  # a saturated unit: tanh is +-1, not NaN
    what = "tanh_forward([[-1000, -30, 0], [0.5, 30, 1000]])"
    got = t.student.tanh_forward(big)
    try:
        assert_finite(got, what)
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} tanh(+-1000) is +-1: e**1000 overflows in float64, so a formula with np.exp "
                          "gives inf / inf = NaN; use np.tanh.") from None
    assert_close(got, np.tanh(big), what)


@check(3, 2, "embedding forward and backward with repeated ids (1-D, 2-D and 3-D ids): autograd, finite differences, "
             "by hand", uses=("embedding_forward", "embedding_backward"),
       hint="an id that occurs several times collects the SUM of its gradients (np.add.at adds repeats); "
            "fancy assignment, dE[ids] = ..., keeps only one of them. dE is float64 whatever the ids' dtype.")
def embedding_hidden(t):
    V, d = 11, 3
    for shape in ((6,), (4, 5), (2, 2, 3)):
        E = t.rng.normal(size=(V, d))
        ids = t.rng.integers(0, V, size=shape)
        ids.flat[0] = ids.flat[-1] = ids.flat[1] = 7  # repeats for sure
        dout = t.rng.normal(size=shape + (d,))
        expected_out, (expected,) = autograd(lambda E: E[torch.as_tensor(ids)], [E], dout)
        what = f"embedding_forward(E ({V}, {d}), ids {shape})"
        assert_close(float64(pure(t, "embedding_forward", E, ids, what=what), what), expected_out, what)
        what = f"embedding_backward(dout {shape + (d,)}, ids {shape} with repeats, {V})"
        got = float64(pure(t, "embedding_backward", dout, ids, V, what=what), what)
        assert_gradient(got, expected, what)
        assert_close(got, fd_of_student(t.student.embedding_forward, [E, ids], 0, dout),
                     f"{what} against finite differences of your embedding_forward", **FD_TOL)
    ids = np.array([2, 0, 2, 2])
    dout = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0], [-1.0, 1.0]])
    assert_gradient(t.student.embedding_backward(dout, ids, 4), np.array([[0.0, 1.0], [0.0, 0.0], [2.0, 4.0], [0.0, 0.0]]),
                    "embedding_backward([[1, 0], [0, 1], [2, 3], [-1, 1]], ids [2, 0, 2, 2], 4)")


# ---- Q4 -------------------------------------------------------------------------------------
def uniform_problem(values: np.ndarray, bound: float, guesses: dict) -> str | None:
    """Why `values` do not look like Uniform(-bound, bound), or None (2,000+ draws)."""
    top, low, mean = float(values.max()), float(values.min()), float(values.mean())
    if top <= bound and low >= -bound and top >= 0.95 * bound and low <= -0.95 * bound \
            and abs(mean) < 0.08 * bound and 0.45 * bound < float(np.abs(values).mean()) < 0.55 * bound:
        return None
    text = f"values from {low:.4f} to {top:.4f} with mean {mean:.4f}, expected uniform in +-{bound:.4f}"
    if low >= -0.05 * bound:
        return text + ": all positive; draw from -bound to +bound, not from 0"
    reach = max(top, -low)
    for label, other in guesses.items():
        if 0.95 * other <= reach <= other * 1.0001 and abs(other - bound) > 0.05 * bound:
            return text + f": that is +-{label}"
    return text


def init_problem(params: dict, V: int, d: int, H: int, k: int) -> str | None:
    """What is wrong with init_params(V, d, H, k, seed): scales, means and ranges, not only sizes."""
    E = as_array(params["E"])[0]
    std, mean, tails = float(E.std()), float(E.mean()), float(np.mean(np.abs(E) > 0.2))
    if not 0.095 <= std <= 0.105:
        return f"['E']: standard deviation {std:.4f}, expected 0.1 (rng.normal(0.0, 0.1, size))"
    if abs(mean) > 0.006:
        return f"['E']: mean {mean:.4f}, expected about 0 (a normal centred at 0)"
    if not 0.03 < tails < 0.065:
        return (f"['E']: {tails:.1%} of the values lie beyond two standard deviations where a normal has 4.6%: "
                "draw E from a normal distribution, not a uniform one")
    guesses = {"1/sqrt(dim)": 1 / math.sqrt(d), "1/sqrt(context*dim)": 1 / math.sqrt(k * d),
               "1/sqrt(hidden)": 1 / math.sqrt(H), "1/sqrt(vocab_size)": 1 / math.sqrt(V), "1": 1.0}
    for name, bound in (("W", 1 / math.sqrt(k * d)), ("U", 1 / math.sqrt(H))):
        problem = uniform_problem(as_array(params[name])[0], bound, guesses)
        if problem:
            return f"[{name!r}]: {problem}"
    return None


@check(4, 1, "init_params: shapes, float64, zero biases; E's mean, spread and shape; W and U centred with the "
             "right range; the default context; reproducible by seed; the global generators left alone",
       uses=("init_params",),
       hint="E ~ rng.normal(0.0, 0.1); W ~ rng.uniform(-1, 1) / sqrt(context*dim); U ~ rng.uniform(-1, 1) / "
            "sqrt(hidden); biases np.zeros; one rng = np.random.default_rng(seed) (never np.random.seed: numpy's "
            "global generator is the rest of the program's).")
def ffnn_init_hidden(t):
    V, d, H, k = 400, 25, 30, 3
    what = f"init_params({V}, {d}, {H}, {k}, seed=11)"
    params = param_dict(call_twice(t.student.init_params, V, d, H, k, 11, what=what), what)
    for name, shape in zip(PARAM_NAMES, [(V, d), (H, k * d), (H,), (V, H), (V,)]):
        assert_shape(params[name], shape, f"{what}[{name!r}]")
        float64(params[name], f"{what}[{name!r}]")
    for name in ("b", "b2"):
        assert_close(params[name], np.zeros(as_array(params[name])[0].shape), f"{what}[{name!r}] (zeros)", rtol=0,
                     atol=0)
    problem = init_problem(params, V, d, H, k)
    if problem:
        raise CheckFailed(f"{what}{problem}")
    W = as_array(params["W"])[0].reshape(-1) * math.sqrt(k * d)  # back to the Uniform(-1, 1) draws
    U = as_array(params["U"])[0].reshape(-1) * math.sqrt(H)
    if np.allclose(W[:20], U[:20], rtol=1e-9, atol=1e-12):
        raise CheckFailed(f"{what}: W and U are made of the same random numbers (W[0, :20] * sqrt(context*dim) == "
                          "U's first 20 * sqrt(hidden)): the generator was re-created for each parameter. Make one "
                          "rng = np.random.default_rng(seed) and draw E, W and U from it in turn.")
    assert_global_generators_untouched(t.student, lambda: t.student.init_params(V, d, H, k, 11), what, seed=20261127)
    other = param_dict(t.student.init_params(V, d, H, k, 12), what)
    for name in ("E", "W", "U"):
        if np.array_equal(as_array(other[name])[0], as_array(params[name])[0]):
            raise CheckFailed(f"{what}[{name!r}]: seeds 11 and 12 give the same values; draw from default_rng(seed)")
    what = f"init_params({V}, {d}, {H}) with the default context and seed"
    default = param_dict(t.student.init_params(V, d, H), what)
    assert_shape(default["W"], (H, 2 * d), f"{what}['W']")
    explicit = param_dict(t.student.init_params(V, d, H, 2, 0), f"init_params({V}, {d}, {H}, 2, 0)")
    for name in PARAM_NAMES:
        assert_close(default[name], explicit[name], f"{what}[{name!r}] against init_params({V}, {d}, {H}, 2, 0)",
                     rtol=0, atol=0)


FFNN_CASES = [(1, 2), (7, 2), (6, 3)]  # (B, k); V = 13, d = 4, H = 5
SATURATED = "saturated params (pre-activations of +-300 to 900, logits of +-1000 whose rows' maxima differ by 800)"
SATURATED_HINT = (" At saturation exp by hand overflows: tanh as (e^a - e^-a) / (e^a + e^-a) is inf / inf = NaN for "
                  "a > 710, a softmax without each row's own maximum (or with the batch's one maximum) is 0 / 0, and "
                  "-log(softmax) is -log(0) = inf. Build the model from tanh_forward, cross_entropy and "
                  "cross_entropy_grad.")


def saturated_ffnn(rng) -> tuple[dict, np.ndarray, np.ndarray]:
    """Parameters (V=13, d=4, H=5, k=2) and 6 windows at which the model saturates, as a trained or badly
    scaled model does: hidden units 0 and 1 have pre-activations 900 and -800 (tanh(a) by exp is NaN beyond
    710, by exp(2a) beyond 355), unit 2 is +-300 by the parity of the first context id, which moves a
    row's logits by +-400, so rows' maxima differ by 800 (a softmax shifted by the batch's one maximum is
    0 / 0 there); unit 0 spreads each row's logits over +-600, and the even rows' target has the lowest
    logit, 1,200 below the row's maximum (its probability is 0 in float64: -log(softmax) is inf). Units 3
    and 4 are ordinary, so the gradients of E and W are not all zero."""
    V, d, H, k, B = 13, 4, 5, 2, 6
    params = random_params(rng, V, d, H, k)
    params["E"][:, 0] = np.where(np.arange(V) % 2 == 0, 1.0, -1.0)
    params["W"][:3] = 0.0
    params["W"][2, 0] = 300.0  # reads dimension 0 of the first context word
    params["b"][:3] = [900.0, -800.0, 0.0]
    params["U"][:, 0] = rng.uniform(-600.0, 600.0, size=V)
    params["U"][:2, 0] = [600.0, -600.0]
    params["U"][:, 2] = 400.0
    contexts = rng.integers(0, V, size=(B, k))
    contexts[:, 0] = 2 * rng.integers(0, V // 2, size=B) + np.arange(B) % 2  # first ids: even, odd, even, ...
    targets = rng.integers(0, V, size=B)
    targets[::2] = 1  # U[1, 0] = -600: the row's lowest logit
    return params, contexts, targets


@check(4, 1, "ffnn_forward logits against torch (batch 1 and more, context 2 and 3; saturated units and logits of "
             "+-1000), float64, inputs unchanged", uses=("ffnn_forward",), needs=FORWARD)
def ffnn_forward_hidden(t):
    V, d, H = 13, 4, 5
    for B, k in FFNN_CASES:
        params = random_params(t.rng, V, d, H, k)
        contexts = contexts_with_repeats(t.rng, B, k, V)
        logits, _, _ = torch_ffnn(params, contexts, np.zeros(B, dtype=np.int64))
        what = f"ffnn_forward(params, contexts ({B}, {k}))"
        assert_close(float64(pure(t, "ffnn_forward", params, contexts, what=what), what), logits, what)
    params, contexts, targets = saturated_ffnn(t.rng)
    logits, _, _ = torch_ffnn(params, contexts, targets)
    what = f"ffnn_forward({SATURATED}, contexts (6, 2))"
    try:
        got = float64(pure(t, "ffnn_forward", params, contexts, what=what), what)
        assert_finite(got, what)
        assert_close(got, logits, what)
    except CheckFailed as failure:
        raise CheckFailed(f"{failure}{SATURATED_HINT}") from None


@check(4, 3, "ffnn_loss_and_grads: loss and every parameter's gradient against torch autograd (also saturated: "
             "pre-activations of hundreds, logits of +-1000 whose rows' maxima differ by 800), inputs unchanged",
       uses=("ffnn_loss_and_grads",), needs=Q1 + Q2[-1:] + Q3,
       hint="the output layer's input is h; tanh's backward uses h; reshape de to (B, k, d) before the "
            "embedding backward, which must add up repeated ids.")
def ffnn_grads_hidden(t):
    V, d, H = 13, 4, 5
    for B, k in FFNN_CASES:
        params = random_params(t.rng, V, d, H, k)
        contexts, targets = contexts_with_repeats(t.rng, B, k, V), t.rng.integers(0, V, size=B)
        _, loss, grads = torch_ffnn(params, contexts, targets)
        what = f"ffnn_loss_and_grads(params (V={V}, d={d}, H={H}), contexts ({B}, {k}), targets ({B},))"
        got_loss, got_grads = parts(pure(t, "ffnn_loss_and_grads", params, contexts, targets, what=what), 2, what)
        assert_close(scalar(float64(got_loss, f"{what}: loss"), f"{what}: loss"), loss, f"{what}: loss")
        got_grads = param_dict(got_grads, f"{what}: grads")
        for name in PARAM_NAMES:
            assert_gradient(float64(got_grads[name], f"{what}: grads[{name!r}]"), grads[name],
                            f"{what}: grads[{name!r}]")
    params, contexts, targets = saturated_ffnn(t.rng)
    _, loss, grads = torch_ffnn(params, contexts, targets)
    what = f"ffnn_loss_and_grads({SATURATED}, contexts (6, 2), targets (6,))"
    try:
        got_loss, got_grads = parts(pure(t, "ffnn_loss_and_grads", params, contexts, targets, what=what), 2, what)
        got_loss = scalar(got_loss, f"{what}: loss")
        assert_finite(got_loss, f"{what}: loss")
        assert_close(got_loss, loss, f"{what}: loss")
        got_grads = param_dict(got_grads, f"{what}: grads")
        for name in PARAM_NAMES:  # the reference's are all finite here
            assert_finite(got_grads[name], f"{what}: grads[{name!r}]")
            assert_gradient(got_grads[name], grads[name], f"{what}: grads[{name!r}]")
    except CheckFailed as failure:
        raise CheckFailed(f"{failure}{SATURATED_HINT}") from None


# A model small enough to read: V=5, d=2, H=3, k=2, B=6. The numbers below were computed once in
# float64 by torch autograd (the staff solution agrees to 1e-16, see tests/test_backprop_grading.py)
# and are written out so that a model whose loss and gradients are both wrong, e.g. all zeros,
# cannot pass.
SMALL_PARAMS = {
    "E": np.array([[0.1, -0.2], [0.3, 0.4], [-0.5, 0.6], [0.7, -0.8], [-0.9, -0.1]]),
    "W": np.array([[0.2, -0.1, 0.4, 0.3], [-0.3, 0.5, 0.1, -0.2], [0.6, 0.2, -0.4, 0.1]]),
    "b": np.array([0.05, -0.1, 0.2]),
    "U": np.array([[0.5, -0.4, 0.3], [-0.2, 0.6, 0.1], [0.3, 0.2, -0.5], [-0.6, 0.1, 0.4], [0.2, -0.3, -0.1]]),
    "b2": np.array([0.1, 0.0, -0.1, 0.2, -0.2]),
}
SMALL_CONTEXTS = np.array([[0, 1], [1, 1], [3, 2], [4, 0], [2, 4], [1, 3]])
SMALL_TARGETS = np.array([2, 0, 1, 4, 3, 1])
SMALL_LOSS = 1.59783882378976
SMALL_GRADS = {
    "E": np.array([[0.04596965393162163, -0.015142029718923256],
                   [-0.08534860502609891, -0.04241096906595226],
                   [0.00023135207452127868, 0.011824335453792753],
                   [0.03507442533501518, -0.005608091721625595],
                   [0.027623921605215825, 0.053168806996005374]]),
    "W": np.array([[0.015543353259937309, -0.0023925796641821964, -0.08995507183508863, -0.04010719058248408],
                   [-0.10478686694710826, 0.039781054445803384, -0.015712617218415575, 0.03416206405633945],
                   [0.003595639859101527, -0.06051785973596965, 0.051453870144538984, 0.031665690112664825]]),
    "b": np.array([0.00855437268993274, -0.0458433484236043, 0.04624727310797257]),
    "U": np.array([[-0.018395439001219628, -0.03045977739351442, 0.001684762810514108],
                   [-0.05665971889988444, 0.08199056353501863, -0.08895661555015313],
                   [-0.04323724239861351, 0.042535548032103104, -0.002291518440365614],
                   [0.08030796576526031, -0.05126828405709763, -0.008289462259439806],
                   [0.037984434534457254, -0.04279805011650966, 0.09785283343944445]]),
    "b2": np.array([0.07877209810516411, -0.1430055094816352, -0.005642523093576539, 0.07790211037068928,
                    -0.008026175900641641]),
}


@check(4, 1, "ffnn_loss_and_grads agrees with finite differences of its own loss, and with a small case by hand",
       uses=("ffnn_loss_and_grads",), needs=Q1 + Q2[-1:] + Q3,
       hint="if the loss is a mean over the batch, so is every gradient (sum vs mean).")
def ffnn_fd_hidden(t):
    V, d, H, B, k = 11, 3, 5, 7, 2
    params = random_params(t.rng, V, d, H, k)
    contexts = t.student.put(contexts_with_repeats(t.rng, B, k, V), "contexts")
    targets = t.student.put(t.rng.integers(0, V, size=B), "targets")
    what = f"ffnn_loss_and_grads(params (V={V}, d={d}, H={H}), contexts ({B}, {k}), targets ({B},))"
    _, grads = parts(t.student.ffnn_loss_and_grads(params, contexts, targets), 2, what)
    grads = param_dict(grads, f"{what}: grads")
    for name in PARAM_NAMES:
        def with_param(value, name=name):
            return {**params, name: value}

        def batch(points, name=name):
            outs = t.student.ffnn_loss_and_grads.map([(with_param(p), contexts, targets) for p in points])
            return [scalar(parts(o, 2, what)[0], f"{what}: loss") for o in outs]

        numeric = finite_difference(None, params[name], batch=batch)
        assert_close(grads[name], numeric, f"{what}: grads[{name!r}] against finite differences of your loss", **FD_TOL)
    what = "ffnn_loss_and_grads(small params (V=5, d=2, H=3), contexts (6, 2), targets (6,))"
    loss, grads = parts(t.student.ffnn_loss_and_grads(SMALL_PARAMS, SMALL_CONTEXTS, SMALL_TARGETS), 2, what)
    assert_close(scalar(loss, f"{what}: loss"), SMALL_LOSS, f"{what}: loss")
    grads = param_dict(grads, f"{what}: grads")
    for name in PARAM_NAMES:
        assert_gradient(grads[name], SMALL_GRADS[name], f"{what}: grads[{name!r}]")


# ---- Q5 -------------------------------------------------------------------------------------
def same_step(t, x: np.ndarray, shape: tuple, eps: float | None):
    """The student's numerical_gradient of a bare grader function, against the grader's own central
    differences at the same step (never against the exact gradient, which differs by O(eps**2))."""
    seed = int(t.rng.integers(1 << 30))
    f = t.student.support("smooth_function", seed, list(shape))
    kwargs = {} if eps is None else {"eps": eps}
    what = f"numerical_gradient(f, x {shape}{'' if eps is None else f', eps={eps:g}'})"
    got = float64(pure(t, "numerical_gradient", f, x, what=what, **kwargs), what)
    assert_shape(got, shape, what)
    step = 1e-6 if eps is None else eps
    expected = finite_difference(SmoothFunction(seed, shape), x, step)
    try:
        assert_close(got, expected, what, **SAME_STEP_TOL[step])
    except CheckFailed as failure:
        cause = step_diagnosis(as_array(got)[0], SmoothFunction(seed, shape), x, step)
        message = re.sub(r" The errors are of float32 rounding size.*?\)\.", "", str(failure)) if cause else str(failure)
        raise CheckFailed(message + cause) from None
    return got


def step_diagnosis(got: np.ndarray, f: SmoothFunction, x: np.ndarray, step: float) -> str:
    """The likely cause when a numerical gradient matches a known wrong recipe."""
    got = got.astype(np.float64)
    central = finite_difference(f, x, step)
    flat = x.reshape(-1)
    forward = np.array([(f(flat + step * e) - f(flat)) / step for e in np.eye(flat.size)]).reshape(x.shape)
    run, unrestored = flat.astype(np.float64), []  # each entry left at x_i - eps after its turn
    for i in range(flat.size):
        run[i] = flat[i] + step
        plus = f(run.reshape(x.shape))
        run[i] = flat[i] - step
        unrestored.append((plus - f(run.reshape(x.shape))) / (2 * step))
    recipes = [(2 * central, "twice the central difference: divide by 2*eps, not eps"),
               (forward, "a one-sided difference (f(x + eps) - f(x)) / eps: use f(x + eps) - f(x - eps)"),
               (np.array(unrestored).reshape(x.shape), "the central difference with the entries never put back: "
                "after entry i's two evaluations x[i] stays at x[i] - eps, so every later entry is differenced at a "
                "moved point. Save the old value and restore it (x[i] = old)")]
    if step > 1e-4:
        recipes.append((f.grad(x), "the exact gradient (or a difference with a tiny step), not the central "
                                   "difference with the eps you were given: use the eps argument"))
    for value, cause in recipes:
        if np.allclose(got, value, rtol=1e-7, atol=1e-9):
            return f" Your result is {cause}."
    return ""


@check(5, 1, "numerical_gradient: central differences at the default step and at eps = 1e-2 and 1e-3, any shape, "
             "x left unchanged", uses=("numerical_gradient",),
       hint="entry i is (f(x + eps*e_i) - f(x - eps*e_i)) / (2*eps) with the eps you are given; perturb a float64 "
            "copy of x and put each entry back exactly (save the old value), so every evaluation moves one entry.")
def numerical_gradient_hidden(t):
    for shape, eps in (((3, 4), None), ((5,), None), ((2, 3, 2), 1e-2), ((4, 3), 1e-3)):
        same_step(t, t.rng.normal(size=shape), shape, eps)


def planted(exact: np.ndarray) -> dict:
    one_entry = exact.copy()
    one_entry[1, 2] += 1e-3 * np.abs(exact).max()
    swapped = exact.copy()
    swapped[0, 1], swapped[2, 3] = exact[2, 3], exact[0, 1]
    return {"the exact gradient": exact, "the exact gradient with one entry off by 0.1%": one_entry,
            "half the exact gradient": 0.5 * exact, "the exact gradient with two entries swapped": swapped}


@check(5, 2, "gradient_check passes the right gradient and flags planted wrong ones, with its eps and tol; "
             "relative_error", uses=("relative_error", "gradient_check"), needs=(),
       hint="error = relative_error(analytic, numerical_gradient(f, x, eps)) with Euclidean norms and the eps you "
            "are given; ok = error <= tol with the tol you are given.")
def gradient_check_hidden(t):
    for _ in range(3):
        a, b = t.rng.normal(size=(4, 3)), t.rng.normal(size=(4, 3))
        b[0] = a[0]
        expected = float(np.linalg.norm(a - b) / (np.linalg.norm(a) + np.linalg.norm(b)))
        what = "relative_error(a (4, 3), b (4, 3))"
        assert_close(scalar(float64(pure(t, "relative_error", a, b, what=what), what), what), expected, what)
    assert_close(scalar(t.student.relative_error(np.zeros(3), np.zeros(3)), "relative_error(0, 0)"), 0.0,
                 "relative_error(zeros, zeros)")
    seed, shape = int(t.rng.integers(1 << 30)), (3, 5)
    f = t.student.support("smooth_function", seed, list(shape))
    grader_f = SmoothFunction(seed, shape)
    x = t.rng.normal(size=shape)
    exact = grader_f.grad(x)
    numeric = {eps: finite_difference(grader_f, x, eps) for eps in (1e-6, 1e-3)}
    cases = [(label, grad, {}) for label, grad in planted(exact).items()]
    # With eps = 1e-3 the exact gradient is ~1e-7 away from the central difference: only a checker that
    # differences at the eps it is given reports that error, and tol = 1e-9 must then flag it.
    cases += [("the exact gradient", exact, {"eps": 1e-3}), ("the exact gradient", exact, {"eps": 1e-3, "tol": 1e-9}),
              ("the exact gradient with one entry off by 0.1%", planted(exact)["the exact gradient with one entry "
                                                                                "off by 0.1%"], {"tol": 1e-2}),
              # at the default eps = 1e-6 the exact gradient is ~1e-10 away: a default step of 1e-3 (~1e-7) fails
              ("the exact gradient at the default eps", exact, {"tol": 1e-8})]
    for label, grad, kwargs in cases:
        settings = "".join(f", {k}={v:g}" for k, v in kwargs.items())
        what = f"gradient_check(f, x (3, 5), {label}{settings})"
        ok, error = parts(pure(t, "gradient_check", f, x, grad, what=what, **kwargs), 2, what)
        ok = as_bool(ok, what)
        error = scalar(float64(error, f"{what}: error"), f"{what}: error")
        eps, tol = kwargs.get("eps", 1e-6), kwargs.get("tol", 1e-6)
        expected = float(np.linalg.norm(grad - numeric[eps]) / (np.linalg.norm(grad) + np.linalg.norm(numeric[eps])))
        should_pass = expected <= tol
        if ok != should_pass:
            raise CheckFailed(f"{what} returned ok={ok!r} with error {error:.3g}, expected ok={should_pass} (the "
                              f"relative error is {expected:.3g}, tol {tol:g})"
                              + (" (a correct gradient must pass)" if should_pass else
                                 " (a gradient off by more than tol must be flagged)"))
        if expected > 1e-8:  # above the rounding noise of two different checkers
            try:
                assert_close(error, expected, f"{what}: error", rtol=1e-4, atol=0)
            except CheckFailed as failure:
                default = float(np.linalg.norm(grad - numeric[1e-6]) /
                                (np.linalg.norm(grad) + np.linalg.norm(numeric[1e-6])))
                unused = eps != 1e-6 and (abs(error - default) <= 1e-4 * default or error < 1e-8)
                raise CheckFailed(f"{failure}" + (" That is the error at the default step: pass eps on to "
                                                  "numerical_gradient." if unused else "")) from None
        elif not 0 <= error <= 1e-7:
            raise CheckFailed(f"{what}: relative error {error:.3g}, expected at most 1e-7")


# ---- Q6 -------------------------------------------------------------------------------------
@check(6, 1, "context_windows: contexts 1-3, streams shorter than the context, integer arrays, ids unchanged",
       uses=("context_windows",))
def windows_hidden(t):
    for N, k in ((50, 1), (50, 2), (40, 3), (2, 3), (1, 1)):
        ids = t.rng.integers(1, 30, size=N)
        padded = np.concatenate([np.zeros(k, dtype=np.int64), ids])
        expected = np.stack([padded[i:i + N] for i in range(k)], axis=1)
        what = f"context_windows(ids ({N},), {k})"
        contexts, targets = parts(pure(t, "context_windows", ids, k, what=what), 2, what)
        for name, got, exp in (("contexts", contexts, expected), ("targets", targets, ids)):
            arr, dtype = as_array(got)
            if arr.dtype.kind not in "iu":
                raise CheckFailed(f"{what}: {name} should be integers, got {dtype}")
            assert_close(arr, exp, f"{what}: {name}", rtol=0, atol=0)


# Exact steps: on a stream of zeros every window is ([0] * context, 0), so every minibatch is the
# same whatever positions are drawn, and one SGD step from the start the grader passes is fixed.
STEP_SETTINGS = dict(context=3, dim=3, hidden=4, lr=0.5, batch_size=5, seed=5)  # none of them the default
STEP_V = 7


def grader_start(t, V: int, dim: int, hidden: int, context: int, seed: int | None = None) -> dict:
    """Initial parameters the grader draws (the reference's init_params) and passes as `start`.

    Why: the start of every training run the grader scores is its own, never the student's code's
    (a start the student chooses can carry weights trained elsewhere; see shakespeare_ffnn)."""
    seed = int(t.rng.integers(1 << 30)) if seed is None else seed
    return {n: np.asarray(v, dtype=np.float64) for n, v in t.ref.init_params(V, dim, hidden, context, seed).items()}


def sgd_expected(t, steps: int, start: dict) -> tuple[dict, list]:
    """`steps` updates p - lr * grad from `start`, computed here from the student's own gradients."""
    s = STEP_SETTINGS
    params = {n: start[n].copy() for n in PARAM_NAMES}
    contexts = np.zeros((s["batch_size"], s["context"]), dtype=np.int64)
    targets = np.zeros(s["batch_size"], dtype=np.int64)
    history, losses = [params], []
    for _ in range(steps):
        what = f"ffnn_loss_and_grads(params, {s['batch_size']} windows of zeros)"
        loss, grads = parts(t.student.ffnn_loss_and_grads(params, contexts, targets), 2, what)
        grads = param_dict(grads, f"{what}: grads")
        losses.append(scalar(loss, f"{what}: loss"))
        for n in PARAM_NAMES:
            assert_shape(grads[n], params[n].shape, f"{what}: grads[{n!r}] (the shape of params[{n!r}])")
        params = {n: params[n] - s["lr"] * as_array(grads[n], what)[0].astype(np.float64) for n in PARAM_NAMES}
        history.append(params)
    return history, losses


def step_diagnosis_sgd(got: dict, history: list, ignored_start: dict | None = None) -> str:
    """Name the usual wrong updates when one step's result matches one of them (`ignored_start`: one
    step from the student's init_params(seed), where a run that ignores the `start` it is given goes)."""
    s = STEP_SETTINGS
    start, right = history[0], history[1]
    grad = {n: (start[n] - right[n]) / s["lr"] for n in PARAM_NAMES}
    if ignored_start is not None and all(np.allclose(got[n], ignored_start[n], rtol=1e-9, atol=1e-12)
                                         for n in PARAM_NAMES):
        return (" Your parameters are one step from init_params(seed), not from the `start` you were given: "
                "start from a copy of `start` when it is not None.")
    recipes = [({n: start[n] for n in PARAM_NAMES}, "the initial parameters: the update never reaches the returned dict "
                "(p = p - lr * grad rebinds a local name; update params[name])"),
               ({n: start[n] + s["lr"] * grad[n] for n in PARAM_NAMES}, "a step along the gradient: p -= lr * grad"),
               ({n: start[n] - grad[n] for n in PARAM_NAMES}, "a step with lr = 1: use the lr argument"),
               ({n: start[n] - 2.0 * grad[n] for n in PARAM_NAMES}, "a step with the default lr = 2: use the lr argument"),
               ({n: start[n] - s["lr"] * grad[n] / s["batch_size"] for n in PARAM_NAMES},
                "a step divided by the batch size again: the gradient of the mean loss is already averaged")]
    for value, cause in recipes:
        if all(np.allclose(got[n], value[n], rtol=1e-9, atol=1e-12) for n in PARAM_NAMES):
            return f" Your parameters after one step are {cause}."
    return ""


@check(6, 1, "train_ffnn by exact steps: zero, one and two SGD steps from the start the grader passes (and from "
             "init_params(seed) without one) on a stream where every minibatch is the same; the losses recorded; "
             "2,500 steps with the same lr throughout; the same seed gives the same result; ids and start unchanged",
       uses=("train_ffnn", "context_windows"), needs=("init_params", "ffnn_loss_and_grads"),
       hint="start from a copy of `start` (init_params(vocab_size, dim, hidden, context, seed) when it is None); "
            "each step: loss and grads of the minibatch, record the loss, then params[name] -= lr * grads[name] "
            "with the arguments you are given.")
def train_steps_hidden(t):
    s = STEP_SETTINGS
    what = f"init_params({STEP_V}, {s['dim']}, {s['hidden']}, {s['context']}, {s['seed']})"
    own = param_dict(t.student.init_params(STEP_V, s["dim"], s["hidden"], s["context"], s["seed"]), what)
    own = {n: as_array(own[n], f"{what}[{n!r}]")[0].astype(np.float64) for n in PARAM_NAMES}
    start = grader_start(t, STEP_V, s["dim"], s["hidden"], s["context"])
    own_history, own_losses = sgd_expected(t, 2, own)
    history, losses = sgd_expected(t, 2, start)
    ids = np.zeros(40, dtype=np.int64)
    for steps, given in ((1, True), (2, True), (0, True), (1, False)):  # steps=0: the start, no losses
        if not given:  # the notebook's own call: no start, so init_params(seed)
            history, losses = own_history, own_losses
        settings = ", ".join(f"{k}={v}" for k, v in {**s, "steps": steps}.items())
        what = f"train_ffnn(ids: 40 zeros, {STEP_V}, {settings}{', start=<the grader start>' if given else ''})"
        extra = {"start": start} if given else {}
        params, got_losses = parts(pure(t, "train_ffnn", ids, STEP_V, what=what, **s, steps=steps, **extra), 2, what)
        params = param_dict(params, what)
        got = {}
        for n in PARAM_NAMES:
            got[n] = as_array(float64(params[n], f"{what}: params[{n!r}]"), what)[0]
            assert_shape(got[n], history[0][n].shape, f"{what}: params[{n!r}]")
        origin = "the start" if given else f"init_params({s['seed']})"
        for n in PARAM_NAMES:
            try:
                assert_close(got[n], history[steps][n], f"{what}: params[{n!r}] against {origin} "
                             f"moved by {steps} step(s) of -lr * (your ffnn_loss_and_grads)", rtol=1e-9, atol=1e-12)
            except CheckFailed as failure:
                cause = step_diagnosis_sgd(got, history, own_history[1] if given else None) if steps == 1 else ""
                raise CheckFailed(f"{failure}{cause}") from None
        got_losses = as_array(got_losses, f"{what}: losses")[0]
        if got_losses.shape != (steps,):
            raise CheckFailed(f"{what}: expected a list of {steps} losses (one per step), got shape {got_losses.shape}")
        try:
            assert_close(got_losses, np.array(losses[:steps]), f"{what}: losses (each minibatch's loss before its "
                         "update)", rtol=1e-9, atol=1e-12)
        except CheckFailed as failure:
            late = np.array(losses[1:steps + 1]) if steps == 1 else None
            if late is not None and np.allclose(got_losses, late, rtol=1e-9):
                raise CheckFailed(f"{failure} You recorded the loss after the update.") from None
            raise
    same_lr_throughout(t, ids, start)
    stream = t.rng.integers(0, STEP_V, size=60)  # without a start, as the notebook calls it: the seed sets it all
    settings = {**s, "steps": 3}
    what = f"train_ffnn(ids (60,), {STEP_V}, ..., steps=3, seed={s['seed']})"
    first, _ = parts(call_twice(t.student.train_ffnn, stream, STEP_V, what=what, **settings), 2, what)
    other, _ = parts(t.student.train_ffnn(stream, STEP_V, **{**settings, "seed": s["seed"] + 1}), 2, what)
    assert_global_generators_untouched(t.student, lambda: t.student.train_ffnn(stream, STEP_V, **settings), what,
                                       seed=20261127)
    first, other = param_dict(first, what), param_dict(other, what)
    if all(np.array_equal(as_array(first[n])[0], as_array(other[n])[0]) for n in ("E", "W", "U")):
        raise CheckFailed(f"{what}: seeds {s['seed']} and {s['seed'] + 1} give the same parameters; start from "
                          "init_params(..., seed) when no start is given, and draw batches from "
                          "np.random.default_rng(seed + 1)")


# Every step the same lr: LONG_RUN exact steps on the stream of zeros (beyond the notebook's 2,000, so a
# schedule that starts late is seen too), compared with the reference's run from the same start. Correct
# variants of the update and of the gradient's algebra (einsum, np.dot, a logsumexp softmax of its own, a
# fresh dict per step) stay within 5e-13 of it, relative, from 3 starts; halving lr after step 1,000
# moves the weights by 0.06 (0.7-3 relative).
LONG_RUN, LONG_RUN_TOL = 2500, dict(rtol=1e-7, atol=1e-10)


def same_lr_throughout(t, ids: np.ndarray, start: dict) -> None:
    """train_ffnn's LONG_RUN steps are LONG_RUN steps of p -= lr * grad with the lr it is given (an lr
    halved after 1,000 steps passed every exact step and the one-sided perplexity threshold)."""
    s = STEP_SETTINGS
    contexts = np.zeros((s["batch_size"], s["context"]), dtype=np.int64)
    if not same_gradient(t, start, contexts, np.zeros(s["batch_size"], dtype=np.int64)):
        return  # a wrong gradient is judged in Q4; the one and two steps above are computed from it
    what = f"train_ffnn(ids: 40 zeros, {STEP_V}, ..., steps={LONG_RUN}, start=<the grader start>)"
    params, losses = parts(t.student.train_ffnn(ids, STEP_V, **s, steps=LONG_RUN, start=start), 2, what)
    params = param_dict(params, what)
    expected, expected_losses = t.ref.train_ffnn(ids, STEP_V, **s, steps=LONG_RUN, start=start)
    losses = as_array(losses, f"{what}: losses")[0].astype(np.float64)
    if losses.shape != (LONG_RUN,):
        raise CheckFailed(f"{what}: expected a list of {LONG_RUN} losses (one per step), got shape {losses.shape}")
    apart = ~np.isclose(losses, expected_losses, **LONG_RUN_TOL)
    where = (f" Your recorded losses part from those of SGD with a constant lr at step {int(np.argmax(apart)) + 1}."
             if apart.any() else "")
    for name in PARAM_NAMES:
        try:
            assert_close(as_array(params[name], what)[0].astype(np.float64), expected[name],
                         f"{what}: params[{name!r}] against {LONG_RUN} steps of p -= lr * grad", **LONG_RUN_TOL)
        except CheckFailed as failure:
            raise CheckFailed(f"{failure}{where} Every step uses the lr you are given: no schedule, decay or "
                              "halving (the docstring's update is p -= lr * grad at every step).") from None


# Minibatches: with lr = 0 the parameters stay at the start, so with batch_size = 1 every recorded
# loss is the loss of ONE window of the stream there, whichever window was drawn.
BATCH_SETTINGS = dict(context=3, dim=3, hidden=4, lr=0.0, batch_size=1, steps=4, seed=9)
# Positions visited: a stream of SPREAD_PARTS equal parts, each with words of its own (SPREAD_WORDS
# ids), trained for steps * batch_size = half its length. A run whose minibatches come from the whole
# stream learns every part's words (each part's gain in log P(its own words | context) is 0.91-1.0
# of the best part's over the reference, shuffled epochs and blocks at random offsets, 5 seeds); one
# that sees only the first half (consecutive slices from the start: issue 31) forgets or never
# learns the later parts, whose gain is negative (-1.4 to -2.8 times the best part's), and so does
# one that draws from the first half only (bench/backprop_thresholds.py --spread). Every part must
# gain at least SPREAD_SHARE of the best part's gain. A run whose best part gains under SPREAD_LEARNED
# (the most is log(14 / 3) = 1.54; correct runs 1.50-1.53) has a broken update, not a sampler to judge:
# a step along the gradient, a rebound loop variable or a second division by the batch size (best gain
# 0.07-0.37) fail the exact steps, and this part says nothing about them; nor does it judge a run whose
# ffnn_loss_and_grads is wrong (a gradient summed over the batch trains unevenly), which Q1-Q4 judge.
SPREAD_PARTS, SPREAD_WORDS, SPREAD_LENGTH, SPREAD_SHARE, SPREAD_LEARNED = 4, 3, 4000, 0.5, 0.75
SPREAD_SETTINGS = dict(context=1, dim=4, hidden=8, lr=0.5, batch_size=10, steps=200, seed=21)


def part_gains(ref, start: dict, params: dict, ids: np.ndarray, part: np.ndarray, context: int) -> np.ndarray:
    """Per part of the stream: how much the mean log-probability of that part's own words, given the
    contexts inside it, rose from `start` to `params` (the grader's forward pass, the reference's)."""
    contexts, _ = ref.context_windows(ids, context)
    gains = []
    for params_ in (start, params):
        logits = ref.ffnn_forward(params_, contexts)
        total = np.logaddexp.reduce(logits, axis=1)
        row = []
        for j in range(SPREAD_PARTS):
            rows = np.flatnonzero(part == j)[context:]  # contexts wholly inside the part
            own = logits[rows][:, 2 + SPREAD_WORDS * j:2 + SPREAD_WORDS * (j + 1)]
            row.append(float(np.mean(np.logaddexp.reduce(own, axis=1) - total[rows])))
        gains.append(row)
    return np.array(gains[1]) - np.array(gains[0])


def positions_spread(t) -> None:
    """Minibatches must come from the whole stream: measured on the trained parameters, not on anything
    the student's code reports (issue 31: consecutive slices from the start saw 28% of Shakespeare)."""
    s = SPREAD_SETTINGS
    V, n = 2 + SPREAD_PARTS * SPREAD_WORDS, SPREAD_LENGTH
    part = np.repeat(np.arange(SPREAD_PARTS), n // SPREAD_PARTS)
    ids = 2 + SPREAD_WORDS * part + t.rng.integers(0, SPREAD_WORDS, size=n)
    start = grader_start(t, V, s["dim"], s["hidden"], s["context"])
    windows, targets = t.ref.context_windows(ids, s["context"])
    probe = t.rng.integers(0, n, size=20)
    if not same_gradient(t, start, windows[probe], targets[probe]):
        return  # a wrong gradient (Q1-Q4, judged there) trains unevenly: which positions were drawn cannot be seen
    settings = ", ".join(f"{key}={value}" for key, value in s.items())
    what = (f"train_ffnn(ids ({n},) in {SPREAD_PARTS} parts of {n // SPREAD_PARTS} positions, each with words of its "
            f"own, {V}, {settings}, start=<the grader start>)")
    params, _ = parts(t.student.train_ffnn(ids, V, **s, start=start), 2, what)
    params = param_dict(params, what)
    shapes = dict(zip(PARAM_NAMES, [(V, s["dim"]), (s["hidden"], s["context"] * s["dim"]), (s["hidden"],),
                                     (V, s["hidden"]), (V,)]))
    trained = {}
    for name in PARAM_NAMES:
        assert_shape(params[name], shapes[name], f"{what}: params[{name!r}]")
        trained[name] = as_array(params[name])[0].astype(np.float64)
    gains = part_gains(t.ref, start, trained, ids, part, s["context"])
    best = float(gains.max()) if np.isfinite(gains).all() else math.nan
    if not best >= SPREAD_LEARNED:
        return  # the update is broken (train_steps_hidden says how): which positions were drawn cannot be seen
    missed = [j + 1 for j, g in enumerate(gains) if not g >= SPREAD_SHARE * best]
    if missed:
        raise CheckFailed(f"{what}: {steps_share(s, n)} of the stream's length is drawn, so every part should be "
                          f"visited about equally often; but the model learned the words of some parts and not of "
                          f"part(s) {', '.join(map(str, missed))} (gain in mean log-probability of each part's own "
                          "words: " + ", ".join(f"{g:.2f}" for g in gains) + "). Your minibatches come from only "
                          "part of the stream, or from one part after another (consecutive slices), so that the "
                          "last part seen wipes out the earlier ones: draw each step's positions at random from "
                          "all len(targets) windows (rng.integers(0, len(targets), size=batch_size)).")


def same_gradient(t, params: dict, contexts: np.ndarray, targets: np.ndarray) -> bool:
    """Whether the student's ffnn_loss_and_grads agrees with the reference's here (its own checks say how
    it does not; this only decides whether a training run's spread can be judged)."""
    try:
        loss, grads = parts(t.student.ffnn_loss_and_grads(params, contexts, targets), 2, "ffnn_loss_and_grads")
        grads = param_dict(grads, "ffnn_loss_and_grads: grads")
        ref_loss, ref_grads = t.ref.ffnn_loss_and_grads(params, contexts, targets)
        return bool(np.isclose(scalar(loss, "loss"), ref_loss, rtol=1e-6) and all(
            np.allclose(as_array(grads[n])[0], ref_grads[n], rtol=1e-6, atol=1e-9) for n in PARAM_NAMES))
    except (CheckFailed, ValueError, TypeError):
        return False


# Windows visited, read off the rows of E that moved (the row of an id moves only when a window with that id
# in its context is drawn; with lr > 0 and a right gradient, it does move then). Two streams, context 1:
# - COVER_WINDOWS windows whose context ids are their positions (window j's context is id j, window 0's the
#   padding 0), drawn COVER_SETTINGS' steps x batch_size = 10,000 times: every window must be drawn. Uniform
#   draws miss one of the 40 with chance at most 40 (39/40)^10000 = 1e-108; blocks of 10 consecutive
#   windows at random offsets (a correct variant) draw an end window with chance 1/31 a step: at most
#   2 (30/31)^1000 = 1.2e-14; shuffled epochs draw each window 250 times. Over 100,000 seeds the least-drawn
#   window was drawn 168 times (rng.integers), 12 times (blocks), and 183 times by rng.choice without
#   replacement (20,000 seeds). A loop that never draws the last window (integers(0, N - 1)), skips the
#   first windows (whose context is padding), draws from a fixed half, or re-creates its generator every
#   epoch (4 steps here: 40 draws repeated) misses windows.
# - LONG_WINDOWS windows in LONG_PARTS equal parts, each with a context id of its own, 500 draws: every part
#   must be drawn (uniform draws miss one with chance at most 8 (7/8)^500 = 1e-28; over 100,000 seeds the
#   least-drawn part was drawn 29 times, of 62.5 expected). A stream longer than
#   Shakespeare's 909k windows, so a cap left from debugging (contexts[:250_000]) misses the later parts.
COVER_WINDOWS = 40
COVER_SETTINGS = dict(context=1, dim=2, hidden=3, lr=0.5, batch_size=10, steps=1000)
LONG_WINDOWS, LONG_PARTS = 1_000_000, 8
LONG_SETTINGS = dict(context=1, dim=2, hidden=3, lr=0.5, batch_size=10, steps=50)


def trained_embedding(t, ids: np.ndarray, V: int, s: dict, start: dict, what: str) -> np.ndarray:
    """E (V, dim) after the student's train_ffnn(ids, V, **s, start=start)."""
    params, _ = parts(t.student.train_ffnn(ids, V, **s, start=start), 2, what)
    params = param_dict(params, what)
    assert_shape(params["E"], (V, s["dim"]), f"{what}: params['E']")
    return as_array(params["E"])[0].astype(np.float64)


def windows_visited(t) -> None:
    """Every window of a short stream is drawn, and every part of a long one (a hunt's loops that never drew
    the last window, skipped the first, kept a fixed half, re-created the generator every epoch, or capped
    the stream at 250,000 windows all passed the spread check)."""
    n = COVER_WINDOWS
    s = {**COVER_SETTINGS, "seed": int(t.rng.integers(1 << 30))}
    V, ids = n + 1, np.arange(1, n + 1)  # id n is only ever a target
    start = grader_start(t, V, s["dim"], s["hidden"], s["context"])
    windows, targets = t.ref.context_windows(ids, s["context"])
    probe = t.rng.integers(0, n, size=20)
    if not same_gradient(t, start, windows[probe], targets[probe]):
        return  # a wrong gradient (Q1-Q4, judged there) need not move the rows of the windows drawn
    settings = ", ".join(f"{key}={value}" for key, value in s.items())
    what = f"train_ffnn(ids ({n},), each id once, {V}, {settings}, start=<the grader start>)"
    drawn = (trained_embedding(t, ids, V, s, start, what)[:n] != start["E"][:n]).any(axis=1)  # (n,): window j drawn
    if not drawn.any():
        return  # no row moved: a broken update (train_steps_hidden says how)
    draws = s["steps"] * s["batch_size"]
    if not drawn.all():
        missed = np.flatnonzero(~drawn)
        cause = ("the last window (rng.integers' high end is excluded: integers(0, len(targets)) reaches the last "
                 "one)" if list(missed) == [n - 1] else
                 "the first window (its context is padding, but it is a real example: the stream's first word)"
                 if list(missed) == [0] else f"{len(missed)} of the {n} windows")
        raise CheckFailed(f"{what}: {draws} minibatch positions were drawn over {n} windows (uniform draws miss "
                          f"none), but the rows of E read by windows {spans(~drawn)} never moved: your loop never "
                          f"drew {cause}. Draw each step's positions from all len(targets) windows, with one "
                          "generator made before the loop.")
    n, parts_ = LONG_WINDOWS, LONG_PARTS
    s = {**LONG_SETTINGS, "seed": int(t.rng.integers(1 << 30))}
    V, ids = parts_ + 1, 1 + np.arange(n, dtype=np.int64) * parts_ // n  # part j's context id is j + 1
    start = grader_start(t, V, s["dim"], s["hidden"], s["context"])
    settings = ", ".join(f"{key}={value}" for key, value in s.items())
    what = f"train_ffnn(ids ({n},) in {parts_} parts, {V}, {settings}, start=<the grader start>)"
    drawn = (trained_embedding(t, ids, V, s, start, what)[1:] != start["E"][1:]).any(axis=1)  # (parts,)
    if drawn.any() and not drawn.all():
        missed = np.flatnonzero(~drawn) + 1
        raise CheckFailed(f"{what}: {s['steps'] * s['batch_size']} positions were drawn from a stream of {n:,} "
                          f"windows, but none from part(s) {', '.join(map(str, missed))} of its {parts_} equal parts "
                          "(uniform draws miss none). Is the stream cut (contexts[:some number], a cap left from "
                          "debugging) or are the positions drawn from a subset? Draw from all len(targets) windows.")


def steps_share(s: dict, n: int) -> str:
    return f"steps x batch_size = {s['steps'] * s['batch_size']} positions, {s['steps'] * s['batch_size'] / n:.0%}"


@check(6, 1, "train_ffnn's minibatches: with lr = 0 and batch_size = 1 each recorded loss is the loss of one window "
             "of the stream (a context with its own target), the steps draw different windows, and they come from "
             "the whole stream (a stream whose parts have words of their own: every part is learned; every window "
             "of a short stream is drawn, the first and the last too; every part of a 1,000,000-window stream)",
       uses=("train_ffnn", "context_windows"), needs=("init_params", "ffnn_loss_and_grads"),
       hint="make the generator once, before the loop; each step draw batch_size positions at random from the whole "
            "stream with it and pass contexts[batch] with targets[batch] (the same positions) to ffnn_loss_and_grads.")
def train_minibatch_hidden(t):
    s = BATCH_SETTINGS
    V, N, k = 7, 60, s["context"]
    stream = t.rng.integers(0, V, size=N)
    padded = np.concatenate([np.zeros(k, dtype=np.int64), stream])
    windows = np.stack([padded[i:i + N] for i in range(k)], axis=1)  # (N, k), computed here
    given = grader_start(t, V, s["dim"], s["hidden"], k)
    start = t.student.put(given, "parameters")
    outs = t.student.ffnn_loss_and_grads.map([(start, windows[i:i + 1], stream[i:i + 1]) for i in range(N)])
    singles = np.array([scalar(parts(o, 2, "ffnn_loss_and_grads(start, one window)")[0],
                               "ffnn_loss_and_grads(start, one window): loss") for o in outs])
    settings = ", ".join(f"{key}={value}" for key, value in s.items())
    what = f"train_ffnn(ids ({N},), {V}, {settings}, start=<the grader start>)"
    _, losses = parts(pure(t, "train_ffnn", stream, V, what=what, **s, start=given), 2, what)
    losses = as_array(losses, f"{what}: losses")[0].astype(np.float64)
    if losses.shape != (s["steps"],):
        raise CheckFailed(f"{what}: expected a list of {s['steps']} losses (one per step), got shape {losses.shape}")
    mean = float(singles.mean())
    for step, loss in enumerate(losses):
        if not np.isclose(singles, loss, rtol=1e-9, atol=1e-12).any():
            cause = (" It is the mean loss of the whole stream: each step must use a random minibatch, not every "
                     "position." if np.isclose(loss, mean, rtol=1e-9, atol=1e-12) else
                     " Do you draw batch_size positions (the argument, not a fixed number), and pass each context "
                     "with its own target (contexts[batch], targets[batch])?")
            raise CheckFailed(f"{what}: the loss recorded at step {step + 1} is {loss:.6f}, which is not the loss of "
                              f"any single window of the stream at the start (those range from "
                              f"{singles.min():.4f} to {singles.max():.4f}); with batch_size=1 and lr=0 it must be "
                              f"one of them.{cause}")
    if np.all(losses == losses[0]):
        raise CheckFailed(f"{what}: all {s['steps']} steps recorded the same loss {losses[0]:.6f}: every step trains "
                          "on the same minibatch. Create the generator np.random.default_rng(seed + 1) once, before the "
                          "loop, and draw new positions from it at every step.")
    positions_spread(t)
    windows_visited(t)


@lru_cache(maxsize=1)
def shakespeare_ids() -> tuple:
    """Train and test streams of word ids with the capped vocabulary (the test plays never leave the grader)."""
    from autograder.data import shakespeare
    vocab = word_vocab(shakespeare.lines("train"), VOCAB_SIZE)
    return word_ids(shakespeare.lines("train"), vocab), word_ids(shakespeare.lines("test"), vocab)


def heldout_perplexity(ref, params: dict, ids: np.ndarray, context: int, every: int = EVAL_EVERY,
                       chunk: int = 4000) -> float:
    """The grader's own forward pass (the reference's) over every `every`-th position of a stream."""
    contexts, targets = ref.context_windows(ids, context)
    contexts, targets = contexts[::every], targets[::every]
    total = 0.0
    for i in range(0, len(targets), chunk):
        logits = ref.ffnn_forward(params, contexts[i:i + chunk])
        total += ref.cross_entropy(logits, targets[i:i + chunk]) * len(targets[i:i + chunk])
    mean = total / len(targets)  # nats per token
    return math.exp(mean) if mean < 700 else math.inf


RELEVANCE_EVERY = 97  # the training windows whose hidden activity weighs the trace (9.4k of 909k)


def ffnn_relevance(params: dict, contexts: np.ndarray) -> dict:
    """How much each entry of E, W and U can move the logits, as weights for the start's trace
    (`start_correlations(weights=...)`), from the model's activity on `contexts`.

    Why: a model trained at home with some hidden units and embedding dimensions left unused can fill
    those with the grader's start at no cost to what it computes (a W row whose unit has no U column,
    a U column whose unit is constant, an E column that no W column reads, a W column that reads an E
    column of zeros); measured: 28 of 64 units and 10 of 32 dimensions, trained at home for 8,000
    steps, kept 0.96, 0.78 and 0.95 of the trace at 0.93x the reference's perplexity. Weighted by
    relevance those entries count for nothing. The weights: unit j's reach r_j = (spread of U's
    column j over the vocabulary) x (mean slope 1 - h_j^2); W[j, c] weighs r_j x (spread of input c);
    U[:, j] the spread of h_j; E[:, i] the reach-weighted norm of the W columns that read dimension i.
    The reference's weighted trace (0.72, 0.52, 0.61) is its unweighted one to 0.01.
    """
    E, W, b, U = (np.asarray(params[n], dtype=np.float64) for n in ("E", "W", "b", "U"))
    x = E[contexts].reshape(len(contexts), -1)  # (N, k*d)
    h = np.tanh(x @ W.T + b)  # (N, H)
    reach = np.linalg.norm(U - U.mean(axis=0, keepdims=True), axis=0) * (1.0 - h ** 2).mean(axis=0)  # (H,)
    H, d = W.shape[0], E.shape[1]
    by_dim = (reach[:, None] * W).reshape(H, -1, d)  # (H, k, d)
    return {"E": np.sqrt((by_dim ** 2).sum(axis=(0, 1)))[None, :], "W": np.outer(reach, x.std(axis=0)),
            "U": h.std(axis=0)[None, :]}


def relevance_contexts(ref, train: np.ndarray) -> np.ndarray:
    return ref.context_windows(train, TRAIN_SETTINGS["context"])[0][::RELEVANCE_EVERY]


def train_and_score(ref) -> dict:
    """The reference's training run with the grader's settings: its perplexity on the test plays,
    and how much of its start each matrix keeps where it matters (`start_profile`, `ffnn_relevance`)."""
    train, test = shakespeare_ids()
    s = TRAIN_SETTINGS
    start = ref.init_params(VOCAB_SIZE, s["dim"], s["hidden"], s["context"], s["seed"])
    params, _ = ref.train_ffnn(train, VOCAB_SIZE, **s)
    weights = ffnn_relevance(params, relevance_contexts(ref, train))
    return {"perplexity": heldout_perplexity(ref, params, test, s["context"]),
            "start": start_profile(start, params, weights=weights)}


@lru_cache(maxsize=2)  # one training for both reference results
def reference_run(ref) -> dict:
    """train_and_score in a child process with one BLAS thread, as the student's worker has.

    Why: threaded BLAS is slower on these small matrices (2-3x on a busy 2-core machine), and the
    threshold is computed once per reference version, while a submission waits for it.
    """
    import json
    import os
    import subprocess
    import sys

    import autograder
    if getattr(ref, "__file__", None):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(autograder.__file__).parents[1]),
                                                           os.environ.get("PYTHONPATH")]))}
        try:
            done = subprocess.run([sys.executable, __file__, ref.__file__], env=env, capture_output=True, text=True,
                                  timeout=900, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            return {"perplexity": float(result["perplexity"]),
                    "start": {str(k): float(v) for k, v in result["start"].items()}}
        except (subprocess.SubprocessError, OSError, ValueError, IndexError, KeyError, TypeError,
                AttributeError) as exc:
            print(f"[lmgrade] backprop threshold: child process failed ({exc}); training in-process", file=sys.stderr)
    return train_and_score(ref)


def checked_params(value, what: str) -> dict:
    """The student's trained parameters as float64 arrays of the right shapes, or a clear failure."""
    V, k, d, H = VOCAB_SIZE, TRAIN_SETTINGS["context"], TRAIN_SETTINGS["dim"], TRAIN_SETTINGS["hidden"]
    params = param_dict(value, what)
    out = {}
    for name, shape in zip(PARAM_NAMES, [(V, d), (H, k * d), (H,), (V, H), (V,)]):
        assert_shape(params[name], shape, f"{what}: params[{name!r}]")
        out[name] = as_array(params[name])[0].astype(np.float64)
        if not np.isfinite(out[name]).all():
            raise CheckFailed(f"{what}: params[{name!r}] has NaN or infinite values: training diverged "
                              "(is the update p -= lr * grad, with the mean-loss gradient?)")
    return out


@reference_result("ffnn-shakespeare")
def shakespeare_threshold_source(ref) -> float:
    """The reference's perplexity for Q6, computed (or read) before any worker starts."""
    return reference_run(ref)["perplexity"]


@reference_result("ffnn-start")
def shakespeare_start_source(ref) -> dict:
    """How much of its start each matrix of the reference's Q6 run keeps (`start_profile`)."""
    return reference_run(ref)["start"]


@check(6, 4, "train_ffnn on Shakespeare: held-out perplexity on unseen plays", timeout=180,
       uses=("train_ffnn", "context_windows"), needs=("init_params", "ffnn_loss_and_grads"),
       hint="each step: a random minibatch, ffnn_loss_and_grads, then p -= lr * grad for every parameter.")
def shakespeare_ffnn(t):
    """The run starts from parameters the grader draws (the reference's init_params, from a seed drawn
    from the grader's secret for this submission) and passes as `start`, never from the student's own
    code: an init_params of the student's could wrap weights trained at home in seed-dependent terms
    that change nothing the model computes (issue 30). The returned weights must descend from that
    start (`assert_descends`): weights trained elsewhere earn nothing."""
    train, test = shakespeare_ids()  # only `train` is sent; the test plays stay here
    s = TRAIN_SETTINGS
    settings = {**s, "seed": t.secret_seed("training seed", bits=31)}
    start = grader_start(t, VOCAB_SIZE, s["dim"], s["hidden"], s["context"], t.secret_seed("initial weights", bits=31))
    what = (f"train_ffnn(Shakespeare train ids ({len(train)},), {VOCAB_SIZE}, "
            f"{', '.join(f'{k}={v}' for k, v in settings.items())}, start=<the grader start>)")
    params, losses = parts(t.student.train_ffnn(t.student.put(train, "training ids"), VOCAB_SIZE, **settings,
                                                start=t.student.put(start, "initial weights")), 2, what)
    params = checked_params(params, what)
    losses = as_array(losses, f"{what}: losses")[0]
    if losses.shape != (settings["steps"],):
        raise CheckFailed(f"{what}: expected a list of {settings['steps']} losses (one per step), got shape "
                          f"{losses.shape}")
    # Messages about the test plays are fixed words and the grader's own figures: the perplexity of
    # parameters the student's code chose, quoted to a few digits, would answer questions about the
    # held-out plays one submission at a time (issue 30).
    ppl = heldout_perplexity(t.ref, params, test, settings["context"])
    if not math.isfinite(ppl) or ppl > 100 * VOCAB_SIZE:
        raise CheckFailed(f"{what}: the trained model's perplexity on the test plays is far worse than a uniform "
                          f"guess ({VOCAB_SIZE}): training went uphill or diverged (the update is p -= lr * grad, "
                          "with the gradient of the mean loss).")
    reference = t.cached("ffnn-shakespeare", lambda: reference_run(t.ref)["perplexity"])
    line = (f"Your trained model on the test plays: perplexity compared with the threshold "
            f"{reference * (1 + PPL_MARGIN):.2f} (the staff's with the same settings, plus {PPL_MARGIN:.0%})")
    if ppl < FLOOR_RATIO * reference:
        raise CheckFailed(f"{line}: implausibly far below the staff's (honest runs stay above {FLOOR_RATIO:.2f} of "
                          "it): the model has seen the test plays. No points.")
    if not ppl <= reference * (1 + PPL_MARGIN):
        raise CheckFailed(f"{line}: above it. The model predicts held-out text worse than expected; the notebook's "
                          "validation perplexity tells you how far off it is.")
    # last: a run that is merely buggy is told about its perplexity above, not about its start
    profile = t.cached("ffnn-start", lambda: reference_run(t.ref)["start"])
    assert_descends(start, params, profile, what, least=START_LEAST, mean=START_MEAN,
                    weights=ffnn_relevance(params, relevance_contexts(t.ref, train)))
    t.note(f"{line}: within it.")


if __name__ == "__main__":  # reference_run's child process: python hidden_checks.py REFERENCE.py
    import json
    import sys

    from autograder.authoring.assignments import load_module
    print(json.dumps(train_and_score(load_module(Path(sys.argv[1]), "lmgrade_reference_backprop_child"))))
