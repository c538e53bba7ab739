"""Hidden checks for `backprop`. Never shipped to students.

Every gradient is checked three ways: against torch autograd of the same expression in float64
(rtol 1e-7), against finite differences (of the student's own forward where it is in the same
question, so forward and backward must agree, else of the grader's), and on one small case whose
answer is written out below, so that code returning zeros everywhere cannot pass a
self-consistency test. Dimensions are always distinct (B != V != H != d) so transposes cannot hide.
Only the student's numpy code runs in the worker; torch runs here, in the trusted process.
"""
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks import check
from autograder.compare import as_array, as_bool, assert_close, assert_finite, assert_shape, parts
from autograder.errors import CheckFailed
from autograder.gradients import assert_gradient, finite_difference
from autograder.perplexity import assert_perplexity
from autograder.support import SmoothFunction, word_ids, word_vocab

PARAM_NAMES = ("E", "W", "b", "U", "b2")
FD_TOL = dict(rtol=1e-5, atol=1e-8)  # finite differences with eps 1e-6 in float64 are good to ~1e-9
# Q6: the graded training run. About 10 s of one CPU core; the threshold is the reference's
# perplexity with the same settings and seed plus PPL_MARGIN (bench/backprop_thresholds.py).
VOCAB_SIZE = 2000
TRAIN_SETTINGS = dict(context=2, dim=32, hidden=64, lr=2.0, batch_size=128, steps=2000, seed=2024)
PPL_MARGIN = 0.08
EVAL_EVERY = 3  # score every third position of the test plays (35k of 106k): a third of the time, same figure


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
@check(1, 1, "softmax and log_softmax on random logits of several shapes")
def softmax_hidden(t):
    for shape in [(7,), (5, 7), (2, 3, 7), (1, 4)]:
        z = 3 * t.rng.normal(size=shape)
        assert_close(t.student.softmax(z), torch.softmax(tt(z), -1).numpy(), f"softmax(z {shape})")
        assert_close(t.student.log_softmax(z), torch.log_softmax(tt(z), -1).numpy(), f"log_softmax(z {shape})")


@check(1, 1, "cross_entropy is the batch mean (batch 1 and 6)",
       hint="the loss is the MEAN over the batch of -log softmax(logits[b])[targets[b]].")
def cross_entropy_hidden(t):
    for B in (1, 6):
        logits, targets = 2 * t.rng.normal(size=(B, 9)), t.rng.integers(0, 9, size=B)
        expected = float(F.cross_entropy(tt(logits), torch.as_tensor(targets)))
        got = scalar(t.student.cross_entropy(logits, targets), f"cross_entropy(logits ({B}, 9), targets ({B},))")
        assert_close(got, expected, f"cross_entropy(logits ({B}, 9), targets ({B},))")


@check(1, 2, "stable for logits of +-1000: no NaN, no inf, correct values",
       hint="subtract each row's maximum before np.exp; compute log_softmax as (z - max) - log(sum(exp(z - max))), "
            "never as log(softmax(z)).")
def softmax_stable(t):
    z = np.array([[1000.0, 0.0, -1000.0, 999.0, 5.0], [-1000.0, -1000.0, -999.0, -1000.0, -1002.0],
                  [1000.0, 1000.0, 1000.0, 1000.0, 1000.0], [-1000.0, 1000.0, 0.0, -500.0, 700.0]])  # (4, 5)
    z = np.concatenate([z, 1000 * t.rng.normal(size=(2, 5))])  # (6, 5)
    targets = np.array([2, 4, 0, 0, 1, 3])
    for name, expected in (("softmax", torch.softmax(tt(z), -1)), ("log_softmax", torch.log_softmax(tt(z), -1))):
        got = getattr(t.student, name)(z)
        assert_finite(got, f"{name}(logits of +-1000 (6, 5))")
        assert_close(got, expected.numpy(), f"{name}(logits of +-1000 (6, 5))")
    got = scalar(t.student.cross_entropy(z, targets), "cross_entropy(logits of +-1000 (6, 5), targets)")
    assert_finite(got, "cross_entropy(logits of +-1000 (6, 5), targets)")
    assert_close(got, float(F.cross_entropy(tt(z), torch.as_tensor(targets))), "cross_entropy(logits of +-1000, targets)")


# ---- Q2 -------------------------------------------------------------------------------------
THIRDS = np.log([1.0, 2.0, 3.0])  # softmax(THIRDS) = [1/6, 1/3, 1/2]


def np_log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def fd_jacobian(fn, z: np.ndarray) -> np.ndarray:
    """J[i, j] = d fn(z)_i / d z_j by central differences of the grader's own fn."""
    return np.stack([finite_difference(lambda v, i=i: fn(v)[i], z) for i in range(len(z))])


@check(2, 2, "softmax and log-softmax Jacobians against autograd, and a case worked by hand",
       hint="J[i, j] = d(output i) / d z_j: row i belongs to output i. Every row of the log-softmax Jacobian "
            "is e_i - p, so it is not symmetric: check which axis your broadcast runs along.")
def jacobians_hidden(t):
    for V in (7, 3):
        z = 2 * t.rng.normal(size=V)
        expected = torch.autograd.functional.jacobian(lambda v: torch.softmax(v, -1), tt(z)).numpy()
        assert_gradient(t.student.softmax_jacobian(z), expected, f"softmax_jacobian(z ({V},))")
        expected = torch.autograd.functional.jacobian(lambda v: torch.log_softmax(v, -1), tt(z)).numpy()
        got = t.student.log_softmax_jacobian(z)
        assert_gradient(got, expected, f"log_softmax_jacobian(z ({V},))")
        assert_close(got, fd_jacobian(np_log_softmax, z), f"log_softmax_jacobian(z ({V},)) against finite differences",
                     **FD_TOL)
        assert_close(t.student.softmax_jacobian(z), fd_jacobian(lambda v: np.exp(np_log_softmax(v)), z),
                     f"softmax_jacobian(z ({V},)) against finite differences", **FD_TOL)
    by_hand = np.array([[5 / 36, -1 / 18, -1 / 12], [-1 / 18, 2 / 9, -1 / 6], [-1 / 12, -1 / 6, 1 / 4]])
    assert_gradient(t.student.softmax_jacobian(THIRDS), by_hand, "softmax_jacobian(log([1, 2, 3]))")
    by_hand = np.array([[5 / 6, -1 / 3, -1 / 2], [-1 / 6, 2 / 3, -1 / 2], [-1 / 6, -1 / 3, 1 / 2]])
    assert_gradient(t.student.log_softmax_jacobian(THIRDS), by_hand, "log_softmax_jacobian(log([1, 2, 3]))")


@check(2, 1, "grad_logits_chain: one-hot and soft targets against autograd",
       hint="dL/dp = -y / p, then the TRANSPOSED softmax Jacobian times it.")
def chain_hidden(t):
    V = 7
    for kind in ("one-hot", "soft"):
        z = 1.5 * t.rng.normal(size=V)
        y = np.eye(V)[int(t.rng.integers(V))] if kind == "one-hot" else t.rng.dirichlet(np.ones(V))
        _, (expected,) = autograd(lambda v: -(tt(y) * torch.log_softmax(v, -1)).sum(), [z])
        got = t.student.grad_logits_chain(z, y)
        assert_gradient(got, expected, f"grad_logits_chain(z ({V},), {kind} y ({V},))")
        assert_close(got, finite_difference(lambda v, y=y: -(y * np_log_softmax(v)).sum(), z),
                     f"grad_logits_chain(z ({V},), {kind} y ({V},)) against finite differences of the loss", **FD_TOL)
    assert_gradient(t.student.grad_logits_chain(THIRDS, np.array([0.0, 0.0, 1.0])), np.array([1 / 6, 1 / 3, -1 / 2]),
                    "grad_logits_chain(log([1, 2, 3]), [0, 0, 1])")


@check(2, 2, "cross_entropy_grad: autograd, finite differences, +-1000 logits and a case by hand",
       hint="the loss is a batch mean, so the gradient is (softmax - one-hot) / B; use a stable softmax.")
def ce_grad_hidden(t):
    for B in (1, 6):
        logits, targets = 2 * t.rng.normal(size=(B, 9)), t.rng.integers(0, 9, size=B)
        what = f"cross_entropy_grad(logits ({B}, 9), targets ({B},))"
        got = t.student.cross_entropy_grad(logits, targets)
        _, (expected,) = autograd(lambda v: F.cross_entropy(v, torch.as_tensor(targets)), [logits])
        assert_gradient(got, expected, what)

        def loss(v, targets=targets):
            return -np_log_softmax(v)[np.arange(len(targets)), targets].mean()

        assert_close(got, finite_difference(loss, logits), f"{what} against finite differences of the loss", **FD_TOL)
    z = np.array([[1000.0, 0.0, -1000.0, 999.0], [-1000.0, -1000.0, -998.0, 1000.0], [5.0, 1000.0, -1000.0, 0.0]])
    targets = np.array([2, 0, 1])
    got = t.student.cross_entropy_grad(z, targets)
    assert_finite(got, "cross_entropy_grad(logits of +-1000 (3, 4), targets)")
    _, (expected,) = autograd(lambda v: F.cross_entropy(v, torch.as_tensor(targets)), [z])
    assert_gradient(got, expected, "cross_entropy_grad(logits of +-1000 (3, 4), targets)")
    logits = np.array([THIRDS, THIRDS[::-1]])
    assert_gradient(t.student.cross_entropy_grad(logits, np.array([2, 2])),
                    np.array([[1 / 12, 1 / 6, -1 / 4], [1 / 4, 1 / 6, -5 / 12]]),
                    "cross_entropy_grad(log([[1, 2, 3], [3, 2, 1]]), [2, 2])")


# ---- Q3 -------------------------------------------------------------------------------------
@check(3, 2, "linear forward and backward (batch 1 and 5, non-square W): autograd, finite differences, by hand",
       hint="dx = dout @ W, dW = dout.T @ x (the shape of W), db = dout summed over the batch (axis 0).")
def linear_hidden(t):
    d_in, d_out = 7, 4
    for B in (1, 5):
        x, W, b = t.rng.normal(size=(B, d_in)), t.rng.normal(size=(d_out, d_in)), t.rng.normal(size=d_out)
        dout = t.rng.normal(size=(B, d_out))
        expected_out, expected = autograd(lambda x, W, b: x @ W.T + b, [x, W, b], dout)
        shapes = f"x ({B}, {d_in}), W ({d_out}, {d_in}), b ({d_out},)"
        assert_close(t.student.linear_forward(x, W, b), expected_out, f"linear_forward({shapes})")
        what = f"linear_backward(dout ({B}, {d_out}), x ({B}, {d_in}), W ({d_out}, {d_in}))"
        got = parts(t.student.linear_backward(dout, x, W), 3, what)
        for name, g, e in zip(("dx", "dW", "db"), got, expected):
            assert_gradient(g, e, f"{what}: {name}")
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


@check(3, 1, "tanh backward from the output h: autograd, finite differences, by hand",
       hint="d tanh(a) / da = 1 - tanh(a)**2 = 1 - h**2, with h the forward's output.")
def tanh_hidden(t):
    a, dout = 1.5 * t.rng.normal(size=(5, 3)), t.rng.normal(size=(5, 3))
    expected_h, (expected,) = autograd(torch.tanh, [a], dout)
    assert_close(t.student.tanh_forward(a), expected_h, "tanh_forward(a (5, 3))")
    got = t.student.tanh_backward(dout, np.tanh(a))
    assert_gradient(got, expected, "tanh_backward(dout (5, 3), h (5, 3))")
    assert_close(got, fd_of_student(t.student.tanh_forward, [a], 0, dout),
                 "tanh_backward(dout, h) against finite differences of your tanh_forward", **FD_TOL)
    assert_gradient(t.student.tanh_backward(np.array([1.0, 2.0, 3.0]), np.array([0.0, 0.5, -0.8])),
                    np.array([1.0, 1.5, 1.08]), "tanh_backward([1, 2, 3], h=[0, 0.5, -0.8])")


@check(3, 2, "embedding forward and backward with repeated ids (1-D and 2-D ids): autograd, finite differences, by hand",
       hint="an id that occurs several times collects the SUM of its gradients (np.add.at adds repeats); "
            "fancy assignment, dE[ids] = ..., keeps only one of them.")
def embedding_hidden(t):
    V, d = 11, 3
    for shape in ((6,), (4, 5)):
        E = t.rng.normal(size=(V, d))
        ids = t.rng.integers(0, V, size=shape)
        ids.flat[0] = ids.flat[-1] = ids.flat[1] = 7  # repeats for sure
        dout = t.rng.normal(size=shape + (d,))
        expected_out, (expected,) = autograd(lambda E: E[torch.as_tensor(ids)], [E], dout)
        assert_close(t.student.embedding_forward(E, ids), expected_out, f"embedding_forward(E ({V}, {d}), ids {shape})")
        what = f"embedding_backward(dout {shape + (d,)}, ids {shape} with repeats, {V})"
        got = t.student.embedding_backward(dout, ids, V)
        assert_gradient(got, expected, what)
        assert_close(got, fd_of_student(t.student.embedding_forward, [E, ids], 0, dout),
                     f"{what} against finite differences of your embedding_forward", **FD_TOL)
    ids = np.array([2, 0, 2, 2])
    dout = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0], [-1.0, 1.0]])
    assert_gradient(t.student.embedding_backward(dout, ids, 4), np.array([[0.0, 1.0], [0.0, 0.0], [2.0, 4.0], [0.0, 0.0]]),
                    "embedding_backward([[1, 0], [0, 1], [2, 3], [-1, 1]], ids [2, 0, 2, 2], 4)")


# ---- Q4 -------------------------------------------------------------------------------------
@check(4, 1, "init_params: shapes, float64, zero biases, scales, reproducible by seed")
def ffnn_init_hidden(t):
    V, d, H, k = 400, 25, 30, 3
    what = f"init_params({V}, {d}, {H}, {k}, seed)"
    params = param_dict(t.student.init_params(V, d, H, k, 11), what)
    for name, shape in zip(PARAM_NAMES, [(V, d), (H, k * d), (H,), (V, H), (V,)]):
        assert_shape(params[name], shape, f"{what}[{name!r}]")
        if as_array(params[name])[1] != "float64":
            raise CheckFailed(f"{what}[{name!r}]: expected float64, got {as_array(params[name])[1]}")
    for name in ("b", "b2"):
        assert_close(params[name], np.zeros(as_array(params[name])[0].shape), f"{what}[{name!r}] (zeros)")
    std = float(np.std(params["E"]))
    if not 0.095 <= std <= 0.105:
        raise CheckFailed(f"{what}['E']: standard deviation {std:.4f}, expected 0.1")
    for name, bound in (("W", 1 / math.sqrt(k * d)), ("U", 1 / math.sqrt(H))):
        values = np.abs(as_array(params[name])[0])
        if values.max() > bound or values.max() < 0.95 * bound or not 0.45 * bound < values.mean() < 0.55 * bound:
            raise CheckFailed(f"{what}[{name!r}]: expected uniform in +-{bound:.4f}, got max |value| {values.max():.4f} "
                              f"and mean |value| {values.mean():.4f}")
    again = param_dict(t.student.init_params(V, d, H, k, 11), what)
    other = param_dict(t.student.init_params(V, d, H, k, 12), what)
    for name in ("E", "W", "U"):
        assert_close(again[name], params[name], f"{what}[{name!r}] twice with the same seed", rtol=0, atol=0)
        if np.array_equal(as_array(other[name])[0], as_array(params[name])[0]):
            raise CheckFailed(f"{what}[{name!r}]: seeds 11 and 12 give the same values; draw from default_rng(seed)")


FFNN_CASES = [(1, 2), (7, 2), (6, 3)]  # (B, k); V = 13, d = 4, H = 5


@check(4, 1, "ffnn_forward logits against torch (batch 1 and more, context 2 and 3)")
def ffnn_forward_hidden(t):
    V, d, H = 13, 4, 5
    for B, k in FFNN_CASES:
        params = random_params(t.rng, V, d, H, k)
        contexts = contexts_with_repeats(t.rng, B, k, V)
        logits, _, _ = torch_ffnn(params, contexts, np.zeros(B, dtype=np.int64))
        assert_close(t.student.ffnn_forward(params, contexts), logits, f"ffnn_forward(params, contexts ({B}, {k}))")


@check(4, 3, "ffnn_loss_and_grads: loss and every parameter's gradient against torch autograd",
       hint="the output layer's input is h; tanh's backward uses h; reshape de to (B, k, d) before the "
            "embedding backward, which must add up repeated ids.")
def ffnn_grads_hidden(t):
    V, d, H = 13, 4, 5
    for B, k in FFNN_CASES:
        params = random_params(t.rng, V, d, H, k)
        contexts, targets = contexts_with_repeats(t.rng, B, k, V), t.rng.integers(0, V, size=B)
        _, loss, grads = torch_ffnn(params, contexts, targets)
        what = f"ffnn_loss_and_grads(params (V={V}, d={d}, H={H}), contexts ({B}, {k}), targets ({B},))"
        got_loss, got_grads = parts(t.student.ffnn_loss_and_grads(params, contexts, targets), 2, what)
        assert_close(scalar(got_loss, f"{what}: loss"), loss, f"{what}: loss")
        got_grads = param_dict(got_grads, f"{what}: grads")
        for name in PARAM_NAMES:
            assert_gradient(got_grads[name], grads[name], f"{what}: grads[{name!r}]")


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
@check(5, 1, "numerical_gradient is accurate with its default step (central differences)",
       hint="use central differences (f(x + eps) - f(x - eps)) / (2 eps) with eps about 1e-6 in float64: a "
            "one-sided difference is off by O(eps), a large step by O(eps**2).")
def numerical_gradient_hidden(t):
    for seed, shape in ((int(t.rng.integers(1 << 30)), (3, 4)), (int(t.rng.integers(1 << 30)), (5,))):
        f = t.student.support("SmoothFunction", seed, list(shape))
        x = t.rng.normal(size=shape)
        exact = SmoothFunction(seed, shape).grad(x)
        assert_close(t.student.numerical_gradient(f, x), exact, f"numerical_gradient(f, x {shape})", rtol=1e-6, atol=1e-7)


@check(5, 2, "gradient_check passes the right gradient and flags planted wrong ones; relative_error",
       hint="error = relative_error(analytic, numerical) with Euclidean norms; ok = error <= tol.")
def gradient_check_hidden(t):
    for _ in range(3):
        a, b = t.rng.normal(size=(4, 3)), t.rng.normal(size=(4, 3))
        b[0] = a[0]
        expected = float(np.linalg.norm(a - b) / (np.linalg.norm(a) + np.linalg.norm(b)))
        assert_close(scalar(t.student.relative_error(a, b), "relative_error(a, b)"), expected, "relative_error(a (4, 3), b (4, 3))")
    assert_close(scalar(t.student.relative_error(np.zeros(3), np.zeros(3)), "relative_error(0, 0)"), 0.0,
                 "relative_error(zeros, zeros)")
    seed, shape = int(t.rng.integers(1 << 30)), (3, 5)
    f = t.student.support("SmoothFunction", seed, list(shape))
    x = t.rng.normal(size=shape)
    exact = SmoothFunction(seed, shape).grad(x)
    one_entry = exact.copy()
    one_entry[1, 2] += 1e-3 * np.abs(exact).max()
    swapped = exact.copy()
    swapped[0, 1], swapped[2, 3] = exact[2, 3], exact[0, 1]
    for label, grad in (("the exact gradient", exact), ("the exact gradient with one entry off by 0.1%", one_entry),
                        ("half the exact gradient", 0.5 * exact), ("the exact gradient with two entries swapped", swapped)):
        what = f"gradient_check(f, x (3, 5), {label})"
        ok, error = parts(t.student.gradient_check(f, x, grad), 2, what)
        ok = as_bool(ok, what)
        error = scalar(error, f"{what}: error")
        should_pass = grad is exact
        if ok != should_pass:
            raise CheckFailed(f"{what} returned ok={ok!r}, expected {should_pass}"
                              + (" (a correct gradient must pass)" if should_pass else " (a wrong gradient must be flagged)"))
        if should_pass:
            if not 0 <= error <= 1e-6:
                raise CheckFailed(f"{what}: relative error {error:.3g}, expected at most 1e-6")
        else:
            expected = float(np.linalg.norm(grad - exact) / (np.linalg.norm(grad) + np.linalg.norm(exact)))
            assert_close(error, expected, f"{what}: error", rtol=1e-3, atol=0)


# ---- Q6 -------------------------------------------------------------------------------------
@check(6, 1, "context_windows: contexts 1-3, streams shorter than the context")
def windows_hidden(t):
    for N, k in ((50, 1), (50, 2), (40, 3), (2, 3), (1, 1)):
        ids = t.rng.integers(1, 30, size=N)
        padded = np.concatenate([np.zeros(k, dtype=np.int64), ids])
        expected = np.stack([padded[i:i + N] for i in range(k)], axis=1)
        what = f"context_windows(ids ({N},), {k})"
        contexts, targets = parts(t.student.context_windows(ids, k), 2, what)
        for name, got, exp in (("contexts", contexts, expected), ("targets", targets, ids)):
            arr, dtype = as_array(got)
            if arr.dtype.kind not in "iu":
                raise CheckFailed(f"{what}: {name} should be integers, got {dtype}")
            assert_close(arr, exp, f"{what}: {name}", rtol=0, atol=0)


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


def train_and_score(ref) -> float:
    """The reference's training run with the grader's settings, scored on the test plays."""
    train, test = shakespeare_ids()
    params, _ = ref.train_ffnn(train, VOCAB_SIZE, **TRAIN_SETTINGS)
    return heldout_perplexity(ref, params, test, TRAIN_SETTINGS["context"])


def reference_perplexity(ref) -> float:
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
            return float(json.loads(done.stdout.strip().splitlines()[-1]))
        except (subprocess.SubprocessError, OSError, ValueError, IndexError) as exc:
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


@check(6, 4, "train_ffnn on Shakespeare: held-out perplexity on unseen plays", timeout=180,
       hint="each step: a random minibatch, ffnn_loss_and_grads, then p -= lr * grad for every parameter.")
def shakespeare_ffnn(t):
    train, test = shakespeare_ids()
    settings = ", ".join(f"{k}={v}" for k, v in TRAIN_SETTINGS.items())
    what = f"train_ffnn(Shakespeare train ids ({len(train)},), {VOCAB_SIZE}, {settings})"
    params, losses = parts(t.student.train_ffnn(t.student.put(train, "training ids"), VOCAB_SIZE, **TRAIN_SETTINGS),
                           2, what)
    params = checked_params(params, what)
    losses = as_array(losses, f"{what}: losses")[0]
    if losses.shape != (TRAIN_SETTINGS["steps"],):
        raise CheckFailed(f"{what}: expected a list of {TRAIN_SETTINGS['steps']} losses (one per step), got shape "
                          f"{losses.shape}")
    ppl = heldout_perplexity(t.ref, params, test, TRAIN_SETTINGS["context"])
    if not math.isfinite(ppl) or ppl > 100 * VOCAB_SIZE:
        raise CheckFailed(f"{what}: the trained model's perplexity on the test plays is {ppl:.3g}, far worse than a "
                          f"uniform guess ({VOCAB_SIZE}): training went uphill or diverged (the update is "
                          "p -= lr * grad, with the gradient of the mean loss).")
    # after the student's run, so that a submission that cannot train never waits for the reference
    threshold = t.cached("ffnn-shakespeare", lambda: reference_perplexity(t.ref)) * (1 + PPL_MARGIN)
    t.note(assert_perplexity(ppl, threshold, "Your trained model on the test plays"))



if __name__ == "__main__":  # reference_perplexity's child process: python hidden_checks.py REFERENCE.py
    import importlib.util
    import json
    import sys

    spec = importlib.util.spec_from_file_location("lmgrade_reference_backprop_child", sys.argv[1])
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    print(json.dumps(train_and_score(reference)))
