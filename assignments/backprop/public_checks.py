"""Public checks for `backprop`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: saved fixtures recorded from the reference by
`lmgrade build`, so these checks also run where the reference is not available. Dimensions are
all different (batch 3, vocabulary 4 or 5, ...) so that a transposed array cannot match. The
inputs are chosen for the commonest bugs: logits of +-1000 (also for the loss, and tanh of +-1000),
probabilities that underflow to 0, functions that change their inputs, repeated ids, a second seed,
a step size and a tolerance other than the default, a matrix for relative_error, one exact SGD step
and the loss it records.
"""
import math

import numpy as np

from autograder.checking import properties
from autograder.checking.checks import check
from autograder.checking.compare import as_array, as_bool, assert_close, assert_finite, assert_shape, parts
from autograder.checking.gradients import assert_gradient, finite_difference
from autograder.checking.purity import call_pure
from autograder.errors import CheckFailed

LOGITS = np.array([[0.0, 1.0, 2.0, 3.0], [1.0, 1.0, 1.0, 1.0], [-2.0, 0.5, 0.0, 4.0]])  # (B=3, V=4)
TARGETS = np.array([3, 0, 1])
EXTREME = np.array([[1000.0, 0.0, -1000.0, 999.0], [-1000.0, -1000.0, -999.0, -1000.0]])  # (2, 4)
PARAM_NAMES = ("E", "W", "b", "U", "b2")
Q1 = ("softmax", "log_softmax", "cross_entropy")
Q3 = ("linear_forward", "linear_backward", "tanh_forward", "tanh_backward", "embedding_forward", "embedding_backward")


def pure(t, call, *args, what: str, **kwargs):
    """`call_pure` (the arguments come back unchanged), then the matrix's `generator` property of the same call:
    no function here needs the global generators, so a `np.random.seed(0)` left inside one fails here too."""
    result = call_pure(call, *args, what=what, **kwargs)
    name, _, rest = what.partition("(")
    properties.run_generator(t, name, call, rest[:-1] if rest.endswith(")") else rest, args, kwargs)
    return result


def param_dict(value, what: str) -> dict:
    if not isinstance(value, dict) or set(value) != set(PARAM_NAMES):
        keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise CheckFailed(f"{what}: expected a dict with keys {list(PARAM_NAMES)}, got {keys}")
    return value


def float64(value, what: str):
    _, dtype = as_array(value, what)
    if dtype != "float64":
        raise CheckFailed(f"{what}: returned {dtype}, expected float64 (numpy's default, which the notebook asks for).")
    return value


def saturated_params(V: int, d: int, H: int, k: int) -> dict:
    """fixed_params turned up until the model saturates, as a badly scaled or long-trained one does: hidden
    units 0 and 1 at pre-activations 900 and -800 (tanh by exp is NaN beyond 710), unit 2 at +-300 by
    the parity of the first context id, which moves a row's logits by +-400 (rows' maxima 800 apart: a
    softmax shifted by the batch's one maximum is 0 / 0), and unit 0 spreading each row's logits over
    +-600 (a target with the lowest logit has probability 0: -log(softmax) is inf)."""
    params = fixed_params(V, d, H, k)
    params["E"][:, 0] = np.where(np.arange(V) % 2 == 0, 1.0, -1.0)
    params["W"][:3] = 0.0
    params["W"][2, 0] = 300.0
    params["b"][:3] = [900.0, -800.0, 0.0]
    params["U"][:, 0] = np.linspace(-600.0, 600.0, V)
    params["U"][:, 2] = 400.0
    return params


def fixed_params(V: int, d: int, H: int, k: int) -> dict:
    """Small deterministic parameters (not init_params: this checks the model, not its init)."""
    grid = lambda *shape, s: np.sin(np.arange(1, 1 + math.prod(shape)) * s).reshape(shape)  # noqa: E731
    return {"E": grid(V, d, s=0.7), "W": 0.5 * grid(H, k * d, s=1.3), "b": 0.1 * grid(H, s=2.1),
            "U": 0.5 * grid(V, H, s=0.9), "b2": 0.1 * grid(V, s=1.7)}


@check(1, 1, "softmax and log_softmax on a small batch and on logits of +-1000 (inputs unchanged)", public=True,
       uses=("softmax", "log_softmax"))
def public_softmax(t):
    got = pure(t, t.student.softmax, LOGITS, what="softmax(logits (3, 4))")
    assert_close(float64(got, "softmax(logits (3, 4))"), t.expected("softmax", lambda ref: ref.softmax(LOGITS)),
                 "softmax(logits (3, 4))")
    assert_close(t.student.softmax(LOGITS[2]), t.expected("softmax1", lambda ref: ref.softmax(LOGITS[2])), "softmax(logits (4,))")
    assert_close(t.student.log_softmax(LOGITS), t.expected("log_softmax", lambda ref: ref.log_softmax(LOGITS)),
                 "log_softmax(logits (3, 4))")
    for name in ("softmax", "log_softmax"):
        what = f"{name}([[1000, 0, -1000, 999], [-1000, -1000, -999, -1000]])"
        got = pure(t, getattr(t.student, name), EXTREME, what=what)
        assert_finite(got, what)
        assert_close(got, t.expected(f"{name}_extreme", lambda ref, name=name: getattr(ref, name)(EXTREME)), what)


@check(1, 1, "cross_entropy on a small batch and on logits of +-1000 (a float64 number, inputs unchanged)", public=True,
       uses=("cross_entropy",))
def public_cross_entropy(t):
    what = "cross_entropy(logits (3, 4), targets [3, 0, 1])"
    got = pure(t, t.student.cross_entropy, LOGITS, TARGETS, what=what)
    assert_close(float64(got, what), t.expected("cross_entropy", lambda ref: ref.cross_entropy(LOGITS, TARGETS)), what)
    # Target -1000 in a row whose maximum is 1000: its probability underflows to 0, its log-probability
    # is about -2000. A loss taken through softmax (log(p), log(p + 1e-12)) cannot get there.
    targets = np.array([2, 0])
    what = "cross_entropy([[1000, 0, -1000, 999], [-1000, -1000, -999, -1000]], targets [2, 0])"
    got = t.student.cross_entropy(EXTREME, targets)
    try:
        assert_finite(got, what)
        assert_close(got, t.expected("cross_entropy_extreme", lambda ref: ref.cross_entropy(EXTREME, targets)), what)
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} Take the loss from log_softmax: softmax is 0 in float64 for a logit 2000 "
                          "below its row's maximum, so log(softmax) is -inf there (or log(1e-12) = -27.6 if you add "
                          "1e-12), where log_softmax gives the true -2000.") from None


@check(2, 1, "Jacobians and logit gradients on a small case, Jacobians also where probabilities underflow to 0, "
             "the logit gradient also on rows whose maxima differ by 750 (inputs unchanged)", public=True,
       uses=("softmax_jacobian", "log_softmax_jacobian", "grad_logits_chain", "cross_entropy_grad"),
       needs=("softmax", "log_softmax"))
def public_primer(t):
    z = np.array([0.5, -1.0, 2.0, 0.0])
    y = np.array([0.1, 0.0, 0.6, 0.3])
    assert_gradient(pure(t, t.student.softmax_jacobian, z, what="softmax_jacobian(z (4,))"),
                    t.expected("J", lambda ref: ref.softmax_jacobian(z)), "softmax_jacobian(z (4,))")
    assert_gradient(t.student.log_softmax_jacobian(z), t.expected("Jlog", lambda ref: ref.log_softmax_jacobian(z)),
                    "log_softmax_jacobian(z (4,))")
    assert_gradient(t.student.grad_logits_chain(z, y), t.expected("chain", lambda ref: ref.grad_logits_chain(z, y)),
                    "grad_logits_chain(z (4,), y (4,))")
    what = "cross_entropy_grad(logits (3, 4), targets [3, 0, 1])"
    got = pure(t, t.student.cross_entropy_grad, LOGITS, TARGETS, what=what)
    assert_gradient(float64(got, what), t.expected("ce_grad", lambda ref: ref.cross_entropy_grad(LOGITS, TARGETS)), what)
    # Two rows whose maxima differ by 750, none large enough to overflow: shifted by the batch's one maximum
    # (z.max() without an axis) the second row is e**-750 = 0 everywhere, so 0 / 0.
    apart = np.array([[400.0, 398.0, 0.0, -5.0], [-350.0, -352.0, -351.0, -400.0]])  # (2, 4)
    what = "cross_entropy_grad([[400, 398, 0, -5], [-350, -352, -351, -400]], targets [1, 2])"
    got = t.student.cross_entropy_grad(apart, np.array([1, 2]))
    try:
        assert_finite(got, what)
        assert_gradient(got, t.expected("ce_grad_apart", lambda ref: ref.cross_entropy_grad(apart, np.array([1, 2]))),
                        what)
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} Shift each row by its own maximum (axis=-1, keepdims=True): the batch's one "
                          "maximum leaves rows far below it at exp(-750) = 0.") from None
    # Two probabilities underflow to exactly 0 (e**-801), with no logit large enough to overflow: a
    # softmax without the max shift still works here (logits of +-1000 stay in the hidden checks, so
    # that bug costs Q2 one point only), a Jacobian that divides by p does not.
    tiny = np.array([0.0, -800.0, 1.0, -800.0])  # (4,): softmax is about [0.27, 0, 0.73, 0]
    for name in ("softmax_jacobian", "log_softmax_jacobian"):
        what = f"{name}(z = [0, -800, 1, -800])"
        got = getattr(t.student, name)(tiny)
        try:
            assert_finite(got, what)
            assert_gradient(got, t.expected(f"{name}_tiny", lambda ref, name=name: getattr(ref, name)(tiny)), what)
        except CheckFailed as failure:
            raise CheckFailed(f"{failure} Two of these probabilities are 0 in float64: build the Jacobian from p "
                              "by products and differences (e_i - p, p_i * (e_i - p)), never by dividing by p.") from None


X = np.arange(12.0).reshape(3, 4) / 10  # (B=3, d_in=4)


@check(3, 1, "linear forward and backward on small inputs (inputs unchanged)", public=True,
       uses=("linear_forward", "linear_backward"))
def public_linear(t):
    x = X
    W = np.array([[1.0, -1.0, 0.5, 2.0], [0.0, 1.0, -2.0, 1.0]])  # (d_out=2, d_in=4)
    b = np.array([0.5, -1.0])
    dout = np.array([[1.0, -2.0], [0.5, 0.0], [-1.0, 3.0]])  # (3, 2)
    assert_close(t.student.linear_forward(x, W, b), t.expected("linear", lambda ref: ref.linear_forward(x, W, b)),
                 "linear_forward(x (3, 4), W (2, 4), b (2,))")
    what = "linear_backward(dout (3, 2), x (3, 4), W (2, 4))"
    got = parts(pure(t, t.student.linear_backward, dout, x, W, what=what), 3, what)
    expected = t.expected("linear_backward", lambda ref: list(ref.linear_backward(dout, x, W)))
    for name, g, e in zip(("dx", "dW", "db"), got, expected):
        assert_gradient(g, e, f"{what}: {name}")


@check(3, 1, "tanh forward and backward on small inputs, forward also on saturated units (inputs unchanged)",
       public=True, uses=("tanh_forward", "tanh_backward"))
def public_tanh(t):
    x, h = X, np.tanh(X)
    assert_close(t.student.tanh_forward(x), np.tanh(x), "tanh_forward(x (3, 4))")
    saturated = np.array([[-800.0, 0.3], [2.0, 1000.0]])  # (2, 2): tanh is -1 and 1 at the corners
    what = "tanh_forward([[-800, 0.3], [2, 1000]])"
    got = t.student.tanh_forward(saturated)
    try:
        assert_finite(got, what)
        assert_close(got, np.tanh(saturated), what)
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} e**800 overflows in float64, so (e^a - e^-a) / (e^a + e^-a) is inf / inf = "
                          "NaN there; np.tanh saturates at +-1.") from None
    what = "tanh_backward(dout (3, 4), h (3, 4))"
    got = pure(t, t.student.tanh_backward, x, h, what=what)
    assert_gradient(got, t.expected("tanh_backward", lambda ref: ref.tanh_backward(x, h)), what)


@check(3, 1, "embedding forward and backward with a repeated id (inputs unchanged)", public=True,
       uses=("embedding_forward", "embedding_backward"))
def public_embedding(t):
    E = np.arange(15.0).reshape(5, 3)  # (V=5, d=3)
    ids = np.array([[0, 2], [2, 2]])  # id 2 three times
    assert_close(t.student.embedding_forward(E, ids), E[ids], "embedding_forward(E (5, 3), ids [[0, 2], [2, 2]])")
    d_emb = np.arange(12.0).reshape(2, 2, 3)
    what = "embedding_backward(dout (2, 2, 3), ids [[0, 2], [2, 2]], 5)"
    got = pure(t, t.student.embedding_backward, d_emb, ids, 5, what=what)
    assert_gradient(float64(got, what), t.expected("embedding_backward", lambda ref: ref.embedding_backward(d_emb, ids, 5)),
                    what)


def init_problem(params: dict, V: int, d: int, H: int, k: int) -> str | None:
    """Means and ranges, not only sizes: E ~ Normal(0, 0.1), W and U uniform in +-1/sqrt(fan-in)."""
    E = as_array(params["E"])[0]
    if not 0.09 <= float(E.std()) <= 0.11 or abs(float(E.mean())) > 0.01:
        return f"['E']: mean {float(E.mean()):.4f} and standard deviation {float(E.std()):.4f}, expected 0 and 0.1"
    for name, bound, label in (("W", 1 / math.sqrt(k * d), "1/sqrt(context*dim)"), ("U", 1 / math.sqrt(H), "1/sqrt(hidden)")):
        values = as_array(params[name])[0]
        low, top, mean = float(values.min()), float(values.max()), float(values.mean())
        if not (-bound <= low <= -0.9 * bound and 0.9 * bound <= top <= bound and abs(mean) < 0.1 * bound):
            return (f"[{name!r}]: values from {low:.4f} to {top:.4f} with mean {mean:.4f}, expected uniform in "
                    f"+-{label} = +-{bound:.4f}")
    return None


@check(4, 1, "feedforward LM: init_params's shapes, dtype, ranges and seed; logits, loss and gradients on a small "
             "model, also saturated (pre-activations of hundreds, logits of +-1000)",
       public=True, uses=("init_params", "ffnn_forward", "ffnn_loss_and_grads"),
       needs=Q1 + ("cross_entropy_grad",) + Q3)
def public_ffnn(t):
    V, d, H, k = 6, 2, 5, 2
    params = fixed_params(V, d, H, k)
    contexts = np.array([[1, 2], [2, 2], [5, 0]])  # (B=3, k=2), a repeated id
    targets = np.array([2, 4, 1])
    init = param_dict(t.student.init_params(V, d, H, k, 0), f"init_params({V}, {d}, {H}, {k}, 0)")
    for name, shape in zip(PARAM_NAMES, [(V, d), (H, k * d), (H,), (V, H), (V,)]):
        assert_shape(init[name], shape, f"init_params({V}, {d}, {H}, {k}, 0)[{name!r}]")
        float64(init[name], f"init_params({V}, {d}, {H}, {k}, 0)[{name!r}]")
    other = param_dict(t.student.init_params(V, d, H, k, 1), f"init_params({V}, {d}, {H}, {k}, 1)")
    if np.array_equal(as_array(other["E"])[0], as_array(init["E"])[0]):
        raise CheckFailed(f"init_params({V}, {d}, {H}, {k}, seed=0) and seed=1 give the same ['E']: draw from "
                          "np.random.default_rng(seed) with the seed you are given.")
    what = "init_params(300, 10, 40, 3, 0)"
    problem = init_problem(param_dict(t.student.init_params(300, 10, 40, 3, 0), what), 300, 10, 40, 3)
    if problem:
        raise CheckFailed(what + problem)
    assert_close(pure(t, t.student.ffnn_forward, params, contexts, what="ffnn_forward(params, contexts (3, 2))"),
                 t.expected("logits", lambda ref: ref.ffnn_forward(params, contexts)), "ffnn_forward(params, contexts (3, 2))")
    what = "ffnn_loss_and_grads(params, contexts (3, 2), targets (3,))"
    loss, grads = parts(pure(t, t.student.ffnn_loss_and_grads, params, contexts, targets, what=what), 2, what)
    exp_loss, exp_grads = t.expected("loss_and_grads", lambda ref: list(ref.ffnn_loss_and_grads(params, contexts, targets)))
    assert_close(loss, exp_loss, f"{what}: loss")
    grads = param_dict(grads, f"{what}: grads")
    for name in PARAM_NAMES:
        assert_gradient(grads[name], exp_grads[name], f"{what}: grads[{name!r}]")
    hot = saturated_params(V, d, H, k)
    hot_contexts, hot_targets = np.array([[0, 3], [1, 2], [4, 5]]), np.array([0, 0, 5])  # first ids even, odd, even
    shown = "saturated params (pre-activations of 900, -800 and +-300; logits of +-1000)"
    try:
        what = f"ffnn_forward({shown}, contexts (3, 2))"
        got = t.student.ffnn_forward(hot, hot_contexts)
        assert_finite(got, what)
        assert_close(got, t.expected("logits_saturated", lambda ref: ref.ffnn_forward(hot, hot_contexts)), what)
        what = f"ffnn_loss_and_grads({shown}, contexts (3, 2), targets (3,))"
        loss, grads = parts(t.student.ffnn_loss_and_grads(hot, hot_contexts, hot_targets), 2, what)
        exp_loss, exp_grads = t.expected("loss_and_grads_saturated",
                                         lambda ref: list(ref.ffnn_loss_and_grads(hot, hot_contexts, hot_targets)))
        assert_finite(loss, f"{what}: loss")
        assert_close(loss, exp_loss, f"{what}: loss")
        grads = param_dict(grads, f"{what}: grads")
        for name in PARAM_NAMES:
            assert_finite(grads[name], f"{what}: grads[{name!r}]")
            assert_gradient(grads[name], exp_grads[name], f"{what}: grads[{name!r}]")
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} At saturation exp by hand overflows: build the model from tanh_forward, "
                          "cross_entropy and cross_entropy_grad (never (e^a - e^-a) / (e^a + e^-a), -log(softmax), "
                          "or a softmax shifted by the batch's one maximum).") from None


@check(5, 1, "numerical_gradient (default step and eps=1e-2), relative_error (also of matrices) and gradient_check "
             "(also with its eps and tol) on a smooth function",
       public=True, uses=("numerical_gradient", "relative_error", "gradient_check"))
def public_gradcheck(t):
    from autograder.sandbox.support import SmoothFunction
    x = np.array([[0.3, -1.2, 0.5], [2.0, 0.1, -0.7]])  # (2, 3)
    f = t.student.support("smooth_function", 7, [2, 3])  # the value only: no gradient to copy
    mine = SmoothFunction(7, (2, 3))
    what = "numerical_gradient(f, x (2, 3))"
    got = pure(t, t.student.numerical_gradient, f, x, what=what)
    assert_close(float64(got, what), finite_difference(mine, x), what, rtol=1e-7, atol=1e-8)
    # The central difference at eps = 1e-2 differs from the exact gradient by about 1e-5: compared
    # with the grader's own central difference at that step, to 1e-9.
    what = "numerical_gradient(f, x (2, 3), eps=1e-2)"
    got = t.student.numerical_gradient(f, x, eps=1e-2)
    if np.allclose(as_array(got, what)[0], mine.grad(x), rtol=1e-7, atol=1e-9):
        raise CheckFailed(f"{what}: this is the exact gradient (or a difference with a tiny step), not the central "
                          "difference with step 1e-2: use the eps argument.")
    assert_close(got, finite_difference(mine, x, 1e-2), what, rtol=1e-9, atol=1e-11)
    a, b = np.array([3.0, 0.0, -4.0]), np.array([3.0, 0.0, 4.0])
    assert_close(t.student.relative_error(a, b), 0.8, "relative_error([3, 0, -4], [3, 0, 4])")  # 8 / (5 + 5)
    try:  # ||[[0, 0], [0, 2]]|| / (||I|| + ||diag(1, -1)||) = 2 / (sqrt(2) + sqrt(2))
        assert_close(t.student.relative_error(np.eye(2), np.diag([1.0, -1.0])), 1 / math.sqrt(2),
                     "relative_error(I (2, 2), diag(1, -1))")
    except CheckFailed as failure:
        raise CheckFailed(f"{failure} Gradients are matrices too: use the Euclidean norm over all entries "
                          "(np.linalg.norm(a - b) with no ord), not a matrix norm.") from None
    exact = mine.grad(x)
    # (arguments as the message shows them, gradient, keyword arguments, should pass, why). At eps = 1e-2
    # the grader's own central difference is the right answer to 1e-12 but 4e-6 away from the exact gradient.
    cases = [("the exact gradient", exact, {}, True, "a correct gradient must pass"),
             ("twice the exact gradient", 2 * exact, {}, False, "a wrong gradient must be flagged"),
             ("the exact gradient times 1.001, tol=1e-2", 1.001 * exact, {"tol": 1e-2}, True,
              "its relative error is 5e-4, under the tol you were given: compare with tol"),
             ("the central difference at step 1e-2, eps=1e-2, tol=1e-8", finite_difference(mine, x, 1e-2),
              {"eps": 1e-2, "tol": 1e-8}, True,
              "it IS the central difference at step 1e-2: pass the eps you were given on to numerical_gradient")]
    for arguments, grad, kwargs, should_pass, why in cases:
        what = f"gradient_check(f, x, {arguments})"
        ok, error = parts(pure(t, t.student.gradient_check, f, x, grad, what=what, **kwargs), 2, what)
        ok = as_bool(ok, what)
        if ok != should_pass:
            raise CheckFailed(f"{what} returned ok={ok!r}, expected {should_pass}: {why}.")


def mean_loss(params: dict, contexts: np.ndarray, targets: np.ndarray) -> float:
    """The model's cross-entropy computed here, from its parameters (not by the code under test)."""
    p = {n: as_array(params[n])[0].astype(np.float64) for n in PARAM_NAMES}
    z = np.tanh(p["E"][contexts].reshape(len(contexts), -1) @ p["W"].T + p["b"]) @ p["U"].T + p["b2"]  # (B, V)
    return float(np.mean(np.logaddexp.reduce(z, axis=1) - z[np.arange(len(targets)), targets]))


@check(6, 1, "context_windows on a short stream; one exact SGD step and the loss it records; train_ffnn lowers the "
             "loss on a tiny language",
       public=True, timeout=60, uses=("context_windows", "train_ffnn"), needs=("init_params", "ffnn_loss_and_grads"))
def public_train(t):
    what = "context_windows([5, 6, 7], 2)"
    contexts, targets = parts(pure(t, t.student.context_windows, np.array([5, 6, 7]), 2, what=what), 2, what)
    assert_close(contexts, np.array([[0, 0], [0, 5], [5, 6]]), f"{what}: contexts", rtol=0, atol=0)
    assert_close(targets, np.array([5, 6, 7]), f"{what}: targets", rtol=0, atol=0)
    # One step on a stream of zeros: every window is ([0, 0], 0), so every minibatch is the same and the
    # step is start - lr * (your gradient), whatever positions are drawn; the start is the grader's.
    V, settings = 5, dict(context=2, dim=2, hidden=3, lr=0.5, batch_size=4, steps=1, seed=1)
    rng = np.random.default_rng(1)
    start = {"E": rng.normal(0.0, 0.1, size=(V, 2)), "W": rng.uniform(-0.5, 0.5, size=(3, 4)), "b": np.zeros(3),
             "U": rng.uniform(-0.5, 0.5, size=(V, 3)), "b2": np.zeros(V)}
    loss, grads = parts(t.student.ffnn_loss_and_grads(start, np.zeros((4, 2), dtype=np.int64),
                                                      np.zeros(4, dtype=np.int64)), 2,
                        "ffnn_loss_and_grads(start, 4 windows of zeros)")
    grads = param_dict(grads, "ffnn_loss_and_grads(...): grads")
    what = "train_ffnn(20 zeros, 5, context=2, dim=2, hidden=3, lr=0.5, batch_size=4, steps=1, seed=1, start=start)"
    params, losses = parts(pure(t, t.student.train_ffnn, np.zeros(20, dtype=np.int64), V, **settings, start=start,
                                     what=what), 2, what)
    params = param_dict(params, what)
    for name in PARAM_NAMES:
        expected = start[name] - 0.5 * as_array(grads[name])[0]
        assert_close(params[name], expected, f"{what}: params[{name!r}] against start[{name!r}] - 0.5 * your gradient"
                     " (start from a copy of the `start` you are given)", rtol=1e-9, atol=1e-12)
    losses = as_array(losses, f"{what}: losses")[0]
    if losses.shape != (1,):
        raise CheckFailed(f"{what}: losses should hold one number per step (1), got shape {losses.shape}")
    assert_close(losses, [float(as_array(loss)[0])], f"{what}: losses against your loss at `start` (record each "
                 "step's loss before its update)", rtol=1e-9, atol=1e-12)
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
    params = param_dict(params, what)
    for name, shape in zip(PARAM_NAMES, [(9, 4), (12, 8), (12,), (9, 12), (9,)]):
        assert_shape(params[name], shape, f"{what}: params[{name!r}]")
    windows = np.stack([np.r_[0, 0, ids[:-2]], np.r_[0, ids[:-1]]], axis=1)  # (3002, 2), as in the example
    loss = mean_loss(params, windows, ids)
    if not loss <= reference + 0.3:
        raise CheckFailed(f"{what}: the trained model's loss on the whole stream is {loss:.3f}, but the "
                          f"staff's code reaches {reference:.3f} with the same settings (allowed: +0.3).")
