"""Public checks for `backprop`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: saved fixtures recorded from the reference by
`lmgrade build`, so these checks also run where the reference is not available. Dimensions are
all different (batch 3, vocabulary 4 or 5, ...) so that a transposed array cannot match.
"""
import math

import numpy as np

from autograder.checks import check
from autograder.compare import as_array, as_bool, assert_close, assert_shape, parts
from autograder.errors import CheckFailed
from autograder.gradients import assert_gradient

LOGITS = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0], [-2.0, 0.5, 0.0, 4.0]])  # (B=3, V=4)
TARGETS = np.array([3, 0, 1])
PARAM_NAMES = ("E", "W", "b", "U", "b2")


def param_dict(value, what: str) -> dict:
    if not isinstance(value, dict) or set(value) != set(PARAM_NAMES):
        keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise CheckFailed(f"{what}: expected a dict with keys {list(PARAM_NAMES)}, got {keys}")
    return value


def fixed_params(V: int, d: int, H: int, k: int) -> dict:
    """Small deterministic parameters (not init_params: this checks the model, not its init)."""
    grid = lambda *shape, s: np.sin(np.arange(1, 1 + math.prod(shape)) * s).reshape(shape)  # noqa: E731
    return {"E": grid(V, d, s=0.7), "W": 0.5 * grid(H, k * d, s=1.3), "b": 0.1 * grid(H, s=2.1),
            "U": 0.5 * grid(V, H, s=0.9), "b2": 0.1 * grid(V, s=1.7)}


@check(1, 1, "softmax, log_softmax and cross_entropy on a small batch", public=True)
def public_softmax(t):
    assert_close(t.student.softmax(LOGITS), t.expected("softmax", lambda ref: ref.softmax(LOGITS)), "softmax(logits (3, 4))")
    assert_close(t.student.softmax(LOGITS[2]), t.expected("softmax1", lambda ref: ref.softmax(LOGITS[2])), "softmax(logits (4,))")
    assert_close(t.student.log_softmax(LOGITS), t.expected("log_softmax", lambda ref: ref.log_softmax(LOGITS)),
                 "log_softmax(logits (3, 4))")
    assert_close(t.student.cross_entropy(LOGITS, TARGETS),
                 t.expected("cross_entropy", lambda ref: ref.cross_entropy(LOGITS, TARGETS)),
                 "cross_entropy(logits (3, 4), targets [3, 0, 1])")


@check(2, 1, "Jacobians and logit gradients on a small case", public=True)
def public_primer(t):
    z = np.array([0.5, -1.0, 2.0, 0.0])
    y = np.array([0.1, 0.0, 0.6, 0.3])
    assert_gradient(t.student.softmax_jacobian(z), t.expected("J", lambda ref: ref.softmax_jacobian(z)),
                    "softmax_jacobian(z (4,))")
    assert_gradient(t.student.log_softmax_jacobian(z), t.expected("Jlog", lambda ref: ref.log_softmax_jacobian(z)),
                    "log_softmax_jacobian(z (4,))")
    assert_gradient(t.student.grad_logits_chain(z, y), t.expected("chain", lambda ref: ref.grad_logits_chain(z, y)),
                    "grad_logits_chain(z (4,), y (4,))")
    assert_gradient(t.student.cross_entropy_grad(LOGITS, TARGETS),
                    t.expected("ce_grad", lambda ref: ref.cross_entropy_grad(LOGITS, TARGETS)),
                    "cross_entropy_grad(logits (3, 4), targets [3, 0, 1])")


@check(3, 1, "linear, tanh and embedding forward and backward on small inputs", public=True)
def public_layers(t):
    x = np.arange(12.0).reshape(3, 4) / 10  # (B=3, d_in=4)
    W = np.array([[1.0, -1.0, 0.5, 2.0], [0.0, 1.0, -2.0, 1.0]])  # (d_out=2, d_in=4)
    b = np.array([0.5, -1.0])
    dout = np.array([[1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]])  # (3, 2)
    assert_close(t.student.linear_forward(x, W, b), t.expected("linear", lambda ref: ref.linear_forward(x, W, b)),
                 "linear_forward(x (3, 4), W (2, 4), b (2,))")
    got = parts(t.student.linear_backward(dout, x, W), 3, "linear_backward(dout (3, 2), x (3, 4), W (2, 4))")
    expected = t.expected("linear_backward", lambda ref: list(ref.linear_backward(dout, x, W)))
    for name, g, e in zip(("dx", "dW", "db"), got, expected):
        assert_gradient(g, e, f"linear_backward(dout (3, 2), x (3, 4), W (2, 4)): {name}")
    h = np.tanh(x)
    assert_close(t.student.tanh_forward(x), np.tanh(x), "tanh_forward(x (3, 4))")
    assert_gradient(t.student.tanh_backward(x, h), t.expected("tanh_backward", lambda ref: ref.tanh_backward(x, h)),
                    "tanh_backward(dout (3, 4), h (3, 4))")
    E = np.arange(15.0).reshape(5, 3)  # (V=5, d=3)
    ids = np.array([[0, 2], [2, 2]])  # id 2 three times
    assert_close(t.student.embedding_forward(E, ids), E[ids], "embedding_forward(E (5, 3), ids [[0, 2], [2, 2]])")
    d_emb = np.arange(12.0).reshape(2, 2, 3)
    assert_gradient(t.student.embedding_backward(d_emb, ids, 5),
                    t.expected("embedding_backward", lambda ref: ref.embedding_backward(d_emb, ids, 5)),
                    "embedding_backward(dout (2, 2, 3), ids [[0, 2], [2, 2]], 5)")


@check(4, 1, "feedforward LM: logits, loss and gradients on a small model", public=True)
def public_ffnn(t):
    V, d, H, k = 6, 2, 5, 2
    params = fixed_params(V, d, H, k)
    contexts = np.array([[1, 2], [2, 2], [5, 0]])  # (B=3, k=2), a repeated id
    targets = np.array([2, 4, 1])
    init = param_dict(t.student.init_params(V, d, H, k, 0), f"init_params({V}, {d}, {H}, {k}, 0)")
    for name, shape in zip(PARAM_NAMES, [(V, d), (H, k * d), (H,), (V, H), (V,)]):
        assert_shape(init[name], shape, f"init_params({V}, {d}, {H}, {k}, 0)[{name!r}]")
    assert_close(t.student.ffnn_forward(params, contexts),
                 t.expected("logits", lambda ref: ref.ffnn_forward(params, contexts)), "ffnn_forward(params, contexts (3, 2))")
    what = "ffnn_loss_and_grads(params, contexts (3, 2), targets (3,))"
    loss, grads = parts(t.student.ffnn_loss_and_grads(params, contexts, targets), 2, what)
    exp_loss, exp_grads = t.expected("loss_and_grads", lambda ref: list(ref.ffnn_loss_and_grads(params, contexts, targets)))
    assert_close(loss, exp_loss, f"{what}: loss")
    grads = param_dict(grads, f"{what}: grads")
    for name in PARAM_NAMES:
        assert_gradient(grads[name], exp_grads[name], f"{what}: grads[{name!r}]")


@check(5, 1, "numerical_gradient, relative_error and gradient_check on a smooth function", public=True)
def public_gradcheck(t):
    from autograder.support import SmoothFunction
    x = np.array([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]])  # (2, 3)
    f = t.student.support("SmoothFunction", 7, [2, 3])
    exact = SmoothFunction(7, (2, 3)).grad(x)
    assert_close(t.student.numerical_gradient(f, x), exact, "numerical_gradient(f, x (2, 3))", rtol=1e-6, atol=1e-7)
    a, b = np.array([3.0, 0.0, -4.0]), np.array([3.0, 0.0, 4.0])
    assert_close(t.student.relative_error(a, b), 0.8, "relative_error([3, 0, -4], [3, 0, 4])")  # 8 / (5 + 5)
    for grad, should_pass in ((exact, True), (2 * exact, False)):
        ok, error = parts(t.student.gradient_check(f, x, grad), 2, "gradient_check(f, x, grad)")
        ok = as_bool(ok, "gradient_check(f, x, grad)")
        if ok != should_pass:
            raise CheckFailed(f"gradient_check(f, x, {'the exact gradient' if should_pass else 'twice the exact gradient'})"
                              f" returned ok={ok!r}, expected {should_pass}")


@check(6, 1, "context_windows on a short stream; train_ffnn lowers the loss on a tiny language", public=True,
       timeout=60)
def public_train(t):
    contexts, targets = parts(t.student.context_windows(np.array([5, 6, 7]), 2), 2, "context_windows([5, 6, 7], 2)")
    assert_close(contexts, np.array([[0, 0], [0, 5], [5, 6]]), "context_windows([5, 6, 7], 2): contexts")
    assert_close(targets, np.array([5, 6, 7]), "context_windows([5, 6, 7], 2): targets")
    # A tiny language over 9 ids: 90% of the time the next id is NEXT[previous id], else any id.
    NEXT = [3, 5, 7, 0, 8, 1, 4, 2, 6]
    rng = np.random.default_rng(0)
    ids = [1, 2]
    for _ in range(3000):
        ids.append(NEXT[ids[-1]] if rng.random() < 0.9 else int(rng.integers(9)))
    ids = np.array(ids)
    settings = dict(context=2, dim=4, hidden=12, lr=1.0, batch_size=32, steps=300, seed=3)
    what = "train_ffnn(ids (3002,), 9, context=2, dim=4, hidden=12, lr=1.0, batch_size=32, steps=300, seed=3)"
    params, losses = parts(t.student.train_ffnn(ids, 9, **settings), 2, what)
    losses = as_array(losses)[0].astype(np.float64)
    if losses.shape != (300,) or not np.isfinite(losses).all():
        raise CheckFailed(f"{what}: losses should be 300 finite numbers, got shape {losses.shape}")
    first, last = losses[:10].mean(), losses[-30:].mean()
    if not last < first - 0.5:
        raise CheckFailed(f"{what}: the mean loss of the first 10 steps is {first:.3f} and of the last 30 steps "
                          f"{last:.3f}; it should go down by more than 0.5. Step against the gradient: p -= lr * grad.")
    reference = t.expected("loss", lambda ref: ref.ffnn_loss_and_grads(
        ref.train_ffnn(ids, 9, **settings)[0], *ref.context_windows(ids, 2))[0])
    windows = np.stack([np.r_[0, 0, ids[:-2]], np.r_[0, ids[:-1]]], axis=1)  # (3002, 2), as in the example
    loss = as_array(parts(t.student.ffnn_loss_and_grads(param_dict(params, what), windows, ids), 2,
                          "ffnn_loss_and_grads(trained params, every window of ids)")[0])[0]
    if not float(loss) <= reference + 0.3:
        raise CheckFailed(f"{what}: the trained model's loss on the whole stream is {float(loss):.3f}, but the "
                          f"staff's code reaches {reference:.3f} with the same settings (allowed: +0.3).")
