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

from autograder.authoring import assignments
from autograder.grading import runner
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

PRIMER = {"public_primer", "primer_stable"}
SOFTMAX = "    exp = np.exp(z - z.max(axis=-1, keepdims=True))\n    return exp / exp.sum(axis=-1, keepdims=True)\n"
LOG_SOFTMAX = ("    shifted = z - z.max(axis=-1, keepdims=True)\n"
               "    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))\n")

# name: (edits, the exact set of failing checks). The first check named for a bug belongs to the
# question of the function the bug is in; checks of later questions that call that function fail
# too and say so (`needs`).
BUGS = {
    # numpy's global generator reseeded "to be safe" beside the right generator: the same parameters, but every
    # other draw of the program then depends on this call (the train_ffnn check calls it without a start too)
    "init_params also seeds numpy's global generator (np.random.seed)": (
        [("    rng = np.random.default_rng(seed)\n    return {\n",
          "    np.random.seed(seed)  # reproducible\n    rng = np.random.default_rng(seed)\n    return {\n")],
        {"ffnn_init_hidden", "train_steps_hidden"}),
    "softmax without subtracting the max": (
        [("    exp = np.exp(z - z.max(axis=-1, keepdims=True))", "    exp = np.exp(z)")],
        # Q2 calls softmax on logits of +-1000, the model (Q4) at saturation
        {"public_softmax", "softmax_stable", "primer_stable", "public_ffnn", "ffnn_grads_hidden"}),
    "log_softmax as the log of softmax": (
        [("    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))", "    return np.log(softmax(z))")],
        # cross_entropy uses log_softmax, and both cross_entropy checks try logits of +-1000, so does the model's loss
        {"public_softmax", "softmax_stable", "public_cross_entropy", "cross_entropy_hidden", "public_ffnn",
         "ffnn_grads_hidden"}),
    "cross_entropy sums over the batch instead of averaging": (
        [("return float(-logp[np.arange(len(targets)), targets].mean())",
          "return float(-logp[np.arange(len(targets)), targets].sum())")],
        {"public_cross_entropy", "cross_entropy_hidden"} | FFNN_GRADS),
    "log-softmax Jacobian transposed": (
        [("    return np.eye(len(p)) - p[None, :]", "    return np.eye(len(p)) - p[:, None]")],
        {"jacobians_hidden"} | PRIMER),
    "cross_entropy_grad sums where the loss averages": (
        [("    return grad / B", "    return grad")],
        {"ce_grad_hidden", "public_train"} | PRIMER | FFNN_GRADS),
    "bias gradient not summed over the batch": (
        [("    db = dout.sum(axis=0)", "    db = dout")],
        {"public_linear", "linear_hidden", "public_train", "train_steps_hidden", "train_minibatch_hidden"} | FFNN_GRADS),
    "weight gradient transposed": (
        [("    dW = dout.T @ x", "    dW = x.T @ dout")],
        {"public_linear", "linear_hidden", "public_train", "train_steps_hidden", "train_minibatch_hidden"} | FFNN_GRADS),
    "tanh derivative 1 - h instead of 1 - h**2": (
        [("    return dout * (1.0 - h ** 2)", "    return dout * (1.0 - h)")],
        {"public_tanh", "tanh_hidden"} | FFNN_GRADS),
    "embedding backward assigns instead of accumulating": (
        [("    np.add.at(dE, ids, dout)", "    dE[ids] = dout")],
        {"public_embedding", "embedding_hidden"} | FFNN_GRADS),
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
        {"public_train", "train_steps_hidden"}),
    # -- side effects: the docstrings say inputs are not modified --------------------------------
    "softmax subtracts the maximum in place (changes the caller's logits)": (
        [("    exp = np.exp(z - z.max(axis=-1, keepdims=True))",
          "    z -= z.max(axis=-1, keepdims=True)\n    exp = np.exp(z)")],
        # the Q2 functions call softmax on their own inputs, so they change them too
        {"public_softmax", "softmax_hidden", "public_primer", "jacobians_hidden", "chain_hidden", "ce_grad_hidden"}),
    "tanh_backward multiplies dout in place": (
        [("    return dout * (1.0 - h ** 2)", "    dout *= 1.0 - h ** 2\n    return dout")],
        {"public_tanh", "tanh_hidden"}),
    "cross_entropy_grad shifts the caller's logits in place": (
        [("    B = logits.shape[0]\n    grad = softmax(logits)\n",
          "    B = logits.shape[0]\n    logits -= logits.max(axis=1, keepdims=True)\n"
          "    grad = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)\n")],
        {"public_primer", "ce_grad_hidden"}),
    "numerical_gradient perturbs the caller's x and undoes it by arithmetic": (
        [("    x = np.array(x, dtype=np.float64)  # a copy we may change\n    grad = np.zeros_like(x)\n"
          "    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views\n    for i in range(flat_x.size):\n"
          "        old = flat_x[i]\n        flat_x[i] = old + eps\n        f_plus = f(x)\n        flat_x[i] = old - eps\n"
          "        f_minus = f(x)\n        flat_x[i] = old\n",
          "    grad = np.zeros_like(x)\n    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)\n"
          "    for i in range(flat_x.size):\n        flat_x[i] += eps\n        f_plus = f(x)\n"
          "        flat_x[i] -= 2 * eps\n        f_minus = f(x)\n        flat_x[i] += eps\n")],
        {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}),
    # -- keyword arguments with other values ------------------------------------------------------
    "numerical_gradient ignores eps (a fixed step of 1e-6)": (
        [("        flat_x[i] = old + eps\n", "        eps = 1e-6\n        flat_x[i] = old + eps\n")],
        {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}),
    "gradient_check differences with the default step, not its eps": (
        [("    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))",
          "    error = relative_error(analytic_grad, numerical_gradient(f, x))")],
        {"public_gradcheck", "gradient_check_hidden"}),
    "gradient_check defaults eps to 1e-3 (the mutant that survived)": (  # lmgrade mutants backprop
        [("def gradient_check(f, x: np.ndarray, analytic_grad: np.ndarray, eps: float = 1e-6, tol: float = 1e-6):",
          "def gradient_check(f, x: np.ndarray, analytic_grad: np.ndarray, eps: float = 1e-3, tol: float = 1e-6):")],
        {"gradient_check_hidden"}),
    "gradient_check compares with 1e-6 instead of tol": (
        [("    return bool(error <= tol), error", "    return bool(error <= 1e-6), error")],
        {"public_gradcheck", "gradient_check_hidden"}),
    "train_ffnn initializes with the default context": (  # only without a start: the grader's own start is right
        [("        start = init_params(vocab_size, dim, hidden, context, seed)\n",
          "        start = init_params(vocab_size, dim, hidden, seed=seed)\n")],
        {"train_steps_hidden"}),
    "train_ffnn ignores the start it is given": (
        [("    if start is None:\n        start = init_params(vocab_size, dim, hidden, context, seed)\n",
          "    start = init_params(vocab_size, dim, hidden, context, seed)\n")],
        {"public_train", "train_steps_hidden", "train_minibatch_hidden"}),
    "train_ffnn trains the start it is given in place": (
        [("    params = {name: np.array(value, dtype=np.float64) for name, value in start.items()}",
          "    params = start")],
        {"public_train", "train_steps_hidden"}),  # with lr = 0 (train_minibatch_hidden) nothing changes
    "init_params ignores its seed": (
        [("    rng = np.random.default_rng(seed)\n    return {", "    rng = np.random.default_rng(0)\n    return {")],
        {"public_ffnn", "ffnn_init_hidden"}),
    # -- edge inputs and dtypes -------------------------------------------------------------------
    "softmax subtracts the maximum of the whole array, not of each row": (
        [("    exp = np.exp(z - z.max(axis=-1, keepdims=True))", "    exp = np.exp(z - z.max())")],
        # cross_entropy_grad's softmax, alone and in the model, meets rows whose maxima differ by 750 and more
        {"public_softmax", "softmax_stable", "public_primer", "primer_stable", "public_ffnn", "ffnn_grads_hidden"}),
    "softmax_jacobian with a softmax of its own that overflows": (
        [("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)",
          "    p = np.exp(z) / np.exp(z).sum()\n    return np.diag(p) - np.outer(p, p)")],
        {"primer_stable"}),
    "context_windows pads with float zeros (float contexts)": (
        [("np.zeros(context, dtype=ids.dtype)", "np.zeros(context)")],
        {"windows_hidden", "public_train", "train_steps_hidden", "train_minibatch_hidden"}),
    "init_params in float32 to save memory": (
        [("    rng = np.random.default_rng(seed)\n    return {", "    rng = np.random.default_rng(seed)\n    params = {"),
         ('        "b2": np.zeros(vocab_size),\n    }\n',
          '        "b2": np.zeros(vocab_size),\n    }\n    return {k: v.astype(np.float32) for k, v in params.items()}\n')],
        # training starts from the grader's start, or copies init_params' in float64
        {"public_ffnn", "ffnn_init_hidden"}),
    "W and U drawn from 0 to the bound, not symmetric": (
        [("        \"W\": rng.uniform(-1.0, 1.0, size=(hidden, context * dim))",
          "        \"W\": rng.uniform(0.0, 1.0, size=(hidden, context * dim))"),
         ("        \"U\": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden))",
          "        \"U\": rng.uniform(0.0, 1.0, size=(vocab_size, hidden))")],
        {"public_ffnn", "ffnn_init_hidden"}),
    "W's range from dim alone, not context * dim": (
        [("/ np.sqrt(context * dim),", "/ np.sqrt(dim),")],
        {"public_ffnn", "ffnn_init_hidden"}),
    # -- training by exact steps --------------------------------------------------------------------
    "SGD update rebinds a loop variable (parameters never change)": (
        [("        for name in params:\n            params[name] -= lr * grads[name]\n",
          "        for name, p in params.items():\n            p = p - lr * grads[name]\n")],
        {"public_train", "train_steps_hidden"}),
    "loss recorded after the update": (
        [("        losses.append(float(loss))\n",
          "        losses.append(float(ffnn_loss_and_grads(params, contexts[batch], targets[batch])[0]))\n")],
        {"public_train", "train_steps_hidden"}),
    "minibatches drawn from numpy's global generator": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = np.random.randint(0, len(targets), size=batch_size)")],
        {"train_steps_hidden", "public_train"}),
    # -- a second blind-spot hunt: one function each, as a student might get it wrong -------------------
    "cross_entropy picks logp[:, targets] (a B x B block) instead of one entry per row": (
        [("return float(-logp[np.arange(len(targets)), targets].mean())", "return float(-logp[:, targets].mean())")],
        {"public_cross_entropy", "cross_entropy_hidden", "public_train"} | FFNN_GRADS),
    "log_softmax subtracts the maximum in place (np.asarray does not copy float64)": (
        [(LOG_SOFTMAX, "    z -= z.max(axis=-1, keepdims=True)\n    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))\n")],
        {"public_softmax", "softmax_hidden", "public_cross_entropy", "cross_entropy_hidden"}),
    "softmax along axis 1 (right for a 2-D batch only)": (
        [(SOFTMAX, "    exp = np.exp(z - z.max(axis=1, keepdims=True))\n    return exp / exp.sum(axis=1, keepdims=True)\n")],
        {"public_softmax", "softmax_hidden", "softmax_stable", "jacobians_hidden", "chain_hidden"} | PRIMER),
    "log_softmax without keepdims on the log of the sum": (
        [(LOG_SOFTMAX, "    shifted = z - z.max(axis=-1, keepdims=True)\n"
                       "    return shifted - np.log(np.exp(shifted).sum(axis=-1))\n")],
        {"public_softmax", "softmax_hidden", "softmax_stable", "public_cross_entropy", "cross_entropy_hidden",
         "public_train", "train_steps_hidden"} | FFNN_GRADS),
    "cross_entropy as log(softmax + 1e-12)": (
        [("    logp = log_softmax(logits)\n", "    logp = np.log(softmax(logits) + 1e-12)\n")],
        {"public_cross_entropy", "cross_entropy_hidden", "public_ffnn", "ffnn_grads_hidden"}),
    "log_softmax_jacobian as the softmax Jacobian divided by p (0 / 0 at +-1000)": (
        [("    p = softmax(z)\n    return np.eye(len(p)) - p[None, :]\n",
          "    p = softmax(z)\n    return softmax_jacobian(z) / p[:, None]\n")],
        {"public_primer", "primer_stable"}),
    "cross_entropy_grad subtracts 1 at grad[:, targets]": (
        [("    grad[np.arange(B), targets] -= 1.0\n", "    grad[:, targets] -= 1.0\n")],
        {"ce_grad_hidden", "public_train"} | PRIMER | FFNN_GRADS),
    "cross_entropy_grad divides by the vocabulary size": (
        [("    B = logits.shape[0]\n    grad = softmax(logits)", "    B = logits.shape[1]\n    grad = softmax(logits)"),
         ("    grad[np.arange(B), targets] -= 1.0\n", "    grad[np.arange(len(targets)), targets] -= 1.0\n")],
        {"ce_grad_hidden"} | PRIMER | FFNN_GRADS),
    "grad_logits_chain assumes a one-hot target (the argmax of y)": (
        [("    dL_dp = -y / softmax(z)\n    return softmax_jacobian(z).T @ dL_dp\n",
          "    t = int(np.argmax(y))\n    p = softmax(z)\n    dL_dp = np.zeros_like(p)\n    dL_dp[t] = -1.0 / p[t]\n"
          "    return softmax_jacobian(z).T @ dL_dp\n")],
        {"chain_hidden"} | PRIMER),
    "bias gradient with keepdims (shape (1, d_out))": (
        [("    db = dout.sum(axis=0)", "    db = dout.sum(axis=0, keepdims=True)")],
        {"public_linear", "linear_hidden", "public_train", "train_steps_hidden", "train_minibatch_hidden"} | FFNN_GRADS),
    "bias gradient averaged over the batch": (
        [("    db = dout.sum(axis=0)", "    db = dout.mean(axis=0)")],
        {"public_linear", "linear_hidden"} | FFNN_GRADS),
    "tanh_forward by the exp formula (NaN for large inputs)": (
        [("    return np.tanh(a)\n", "    return (np.exp(a) - np.exp(-a)) / (np.exp(a) + np.exp(-a))\n")],
        {"public_tanh", "tanh_hidden", "public_ffnn", "ffnn_forward_hidden", "ffnn_grads_hidden"}),
    "tanh_backward applies tanh to the output again": (
        [("    return dout * (1.0 - h ** 2)", "    return dout * (1.0 - np.tanh(h) ** 2)")],
        {"public_tanh", "tanh_hidden"} | FFNN_GRADS),
    "embedding_backward sizes dE by the largest id, not vocab_size": (
        [("    dE = np.zeros((vocab_size, dout.shape[-1]))\n", "    dE = np.zeros((int(np.max(ids)) + 1, dout.shape[-1]))\n")],
        {"public_embedding", "embedding_hidden", "ffnn_grads_hidden", "ffnn_fd_hidden", "train_steps_hidden",
         "train_minibatch_hidden"}),
    "embedding_backward loops over the first axis (repeats within a row lost)": (
        [("    np.add.at(dE, ids, dout)\n", "    for i in range(len(ids)):\n        dE[ids[i]] += dout[i]\n")],
        {"public_embedding", "embedding_hidden"} | FFNN_GRADS),
    "E drawn with variance 0.1 (standard deviation sqrt(0.1))": (
        [('"E": rng.normal(0.0, 0.1, size=(vocab_size, dim))', '"E": rng.normal(0.0, np.sqrt(0.1), size=(vocab_size, dim))')],
        {"public_ffnn", "ffnn_init_hidden"}),
    "U's range from the vocabulary size": (
        [("size=(vocab_size, hidden)) / np.sqrt(hidden)", "size=(vocab_size, hidden)) / np.sqrt(vocab_size)")],
        {"public_ffnn", "ffnn_init_hidden"}),
    "init_params re-creates the generator for each parameter (W and U share their draws)": (
        [('        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim))',
          '        "W": np.random.default_rng(seed).uniform(-1.0, 1.0, size=(hidden, context * dim))'),
         ('        "U": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden))',
          '        "U": np.random.default_rng(seed).uniform(-1.0, 1.0, size=(vocab_size, hidden))')],
        {"ffnn_init_hidden"}),
    "ffnn_forward looks up E[contexts.T] (embeddings interleaved across the batch)": (
        [('    e = embedding_forward(params["E"], contexts).reshape(B, -1)\n',
          '    e = embedding_forward(params["E"], contexts.T).reshape(B, -1)\n')],
        {"public_ffnn", "ffnn_forward_hidden"}),
    "ffnn_loss_and_grads takes tanh's backward from the pre-activation": (
        [("    h = tanh_forward(linear_forward(e, W, b))  # (B, H)\n",
          "    a = linear_forward(e, W, b)\n    h = tanh_forward(a)  # (B, H)\n"),
         ("    da = tanh_backward(dh, h)", "    da = tanh_backward(dh, a)")],
        {"public_train"} | FFNN_GRADS),
    "relative_error with the spectral norm (ord=2 on a matrix)": (
        [("    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1e-12))",
          "    return float(np.linalg.norm(a - b, 2) / max(np.linalg.norm(a, 2) + np.linalg.norm(b, 2), 1e-12))")],
        {"public_gradcheck", "gradient_check_hidden"}),
    "numerical_gradient never puts the perturbed entry back": (
        [("        f_minus = f(x)\n        flat_x[i] = old\n", "        f_minus = f(x)\n")],
        {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}),
    "numerical_gradient perturbs x[i] (a whole row of a matrix)": (
        [("    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views\n    for i in range(flat_x.size):\n"
          "        old = flat_x[i]\n        flat_x[i] = old + eps\n        f_plus = f(x)\n        flat_x[i] = old - eps\n"
          "        f_minus = f(x)\n        flat_x[i] = old\n        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n",
          "    for i in range(len(x)):\n        old = x[i].copy()\n        x[i] = old + eps\n        f_plus = f(x)\n"
          "        x[i] = old - eps\n        f_minus = f(x)\n        x[i] = old\n        grad[i] = (f_plus - f_minus) / (2 * eps)\n")],
        {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}),
    "gradient_check passes tol where eps belongs": (
        [("numerical_gradient(f, x, eps))", "numerical_gradient(f, x, tol))")],
        {"public_gradcheck", "gradient_check_hidden"}),
    "context_windows ends each window at the target itself": (
        [("    contexts = np.stack([padded[i:i + len(ids)] for i in range(context)], axis=1)\n",
          "    contexts = np.stack([padded[i:i + len(ids)] for i in range(1, context + 1)], axis=1)\n")],
        {"windows_hidden", "public_train", "train_minibatch_hidden"}),
    "generator re-created at every step (the same minibatch every step)": (
        [("    rng = np.random.default_rng(seed + 1)\n    losses = []\n    for _ in range(steps):\n",
          "    losses = []\n    for _ in range(steps):\n        rng = np.random.default_rng(seed + 1)\n")],
        {"public_train", "train_minibatch_hidden"}),
    "minibatch drawn once, before the loop": (
        [("    losses = []\n    for _ in range(steps):\n        batch = rng.integers(0, len(targets), size=batch_size)\n",
          "    losses = []\n    batch = rng.integers(0, len(targets), size=batch_size)\n    for _ in range(steps):\n")],
        {"public_train", "train_minibatch_hidden"}),
    "batch_size ignored (always 128 positions)": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = rng.integers(0, len(targets), size=128)")],
        {"train_minibatch_hidden"}),
    "contexts shuffled without their targets": (
        [("    rng = np.random.default_rng(seed + 1)\n", "    rng = np.random.default_rng(seed + 1)\n    rng.shuffle(contexts)\n")],
        {"public_train", "train_minibatch_hidden"}),
    "full-batch gradient descent (every position at every step)": (
        [("        loss, grads = ffnn_loss_and_grads(params, contexts[batch], targets[batch])",
          "        loss, grads = ffnn_loss_and_grads(params, contexts, targets)")],
        {"train_minibatch_hidden"}),
    "SGD update divided by the batch size again": (
        [("            params[name] -= lr * grads[name]", "            params[name] -= lr * grads[name] / batch_size")],
        {"public_train", "train_steps_hidden"}),
    # issue 31: 2,000 steps of 128 saw the first 256k of Shakespeare's 909k positions, within the margin
    "minibatches as consecutive slices from the start of the stream": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = np.arange(_ * batch_size, (_ + 1) * batch_size) % len(targets)")],
        {"train_minibatch_hidden"}),
    "minibatches drawn from the first half of the stream": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = rng.integers(0, len(targets) // 2, size=batch_size)")],
        {"train_minibatch_hidden"}),
    "learning rate decayed at every step": (
        [("    for _ in range(steps):\n        batch", "    for step in range(steps):\n        batch"),
         ("            params[name] -= lr * grads[name]", "            params[name] -= lr / (1 + 0.01 * step) * grads[name]")],
        {"train_steps_hidden"}),
    # -- a third hunt (A12-A27): saturating inputs in the model, windows a loop never draws, edge sizes -------
    "ffnn_loss_and_grads: its own softmax for dz, without the max": (
        [("    loss = cross_entropy(z, targets)\n    dz = cross_entropy_grad(z, targets)  # (B, V)\n",
          "    loss = cross_entropy(z, targets)\n    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)\n"
          "    dz = p.copy()\n    dz[np.arange(B), targets] -= 1\n    dz /= B\n")],
        {"public_ffnn", "ffnn_grads_hidden"}),
    "ffnn_loss_and_grads: the loss as -log(softmax) of the targets": (
        [("    loss = cross_entropy(z, targets)\n",
          "    loss = float(-np.log(softmax(z)[np.arange(B), targets]).mean())\n")],
        {"public_ffnn", "ffnn_grads_hidden"}),
    "ffnn_loss_and_grads: tanh as (e^2a - 1) / (e^2a + 1)": (
        [("    h = tanh_forward(linear_forward(e, W, b))  # (B, H)\n",
          "    a = linear_forward(e, W, b)\n    h = (np.exp(2 * a) - 1) / (np.exp(2 * a) + 1)  # (B, H)\n")],
        {"public_ffnn", "ffnn_grads_hidden"}),
    "ffnn_forward: tanh as (e^a - e^-a) / (e^a + e^-a)": (
        [('    h = tanh_forward(linear_forward(e, params["W"], params["b"]))\n',
          '    a = linear_forward(e, params["W"], params["b"])\n    h = (np.exp(a) - np.exp(-a)) / (np.exp(a) + np.exp(-a))\n')],
        {"public_ffnn", "ffnn_forward_hidden"}),
    "ffnn_loss_and_grads: dz from a softmax shifted by the batch's one maximum": (
        [("    loss = cross_entropy(z, targets)\n    dz = cross_entropy_grad(z, targets)  # (B, V)\n",
          "    loss = cross_entropy(z, targets)\n    p = np.exp(z - z.max())\n    p /= p.sum(axis=1, keepdims=True)\n"
          "    dz = p\n    dz[np.arange(B), targets] -= 1\n    dz /= B\n")],
        {"public_ffnn", "ffnn_grads_hidden"}),
    "cross_entropy_grad: a softmax of its own shifted by the batch's one maximum": (
        [("    grad = softmax(logits)\n",
          "    exp = np.exp(logits - logits.max())\n    grad = exp / exp.sum(axis=1, keepdims=True)\n")],
        {"public_primer", "primer_stable", "public_ffnn", "ffnn_grads_hidden"}),
    "train_ffnn never draws the last window (integers(0, N - 1))": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = rng.integers(0, len(targets) - 1, size=batch_size)")],
        {"train_minibatch_hidden"}),
    "train_ffnn skips the first `context` windows (their contexts hold padding)": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = rng.integers(context, len(targets), size=batch_size)")],
        {"train_minibatch_hidden"}),
    "train_ffnn prints the last loss after the loop (IndexError when steps=0)": (
        [("    return params, losses\n", '    print(f"done: last minibatch loss {losses[-1]:.4f}")\n    return params, losses\n')],
        {"train_steps_hidden"}),
    "train_ffnn re-creates its generator at every epoch": (
        [("    for _ in range(steps):\n        batch = rng.integers(0, len(targets), size=batch_size)",
          "    per_epoch = max(1, len(targets) // batch_size)\n    for step in range(steps):\n"
          "        if step % per_epoch == 0:\n            rng = np.random.default_rng(seed + 1)\n"
          "        batch = rng.integers(0, len(targets), size=batch_size)")],
        {"train_minibatch_hidden"}),
    "train_ffnn trains on the first 250,000 windows only (a cap left from debugging)": (
        [("    contexts, targets = context_windows(ids, context)\n",
          "    contexts, targets = context_windows(ids, context)\n"
          "    contexts, targets = contexts[:250_000], targets[:250_000]  # faster while debugging\n")],
        {"train_minibatch_hidden"}),
    "train_ffnn draws from a fixed random half of the windows": (
        [("        batch = rng.integers(0, len(targets), size=batch_size)",
          "        batch = keep[rng.integers(0, len(keep), size=batch_size)]"),
         ("    rng = np.random.default_rng(seed + 1)\n",
          "    rng = np.random.default_rng(seed + 1)\n    keep = rng.choice(len(targets), size=len(targets) // 2, replace=False)\n")],
        {"train_minibatch_hidden"}),
    "train_ffnn halves the learning rate after 1,000 steps": (
        [("    for _ in range(steps):\n        batch", "    for step in range(steps):\n        batch"),
         ("            params[name] -= lr * grads[name]", "            params[name] -= (lr if step < 1000 else lr / 2) * grads[name]")],
        {"train_steps_hidden"}),
    # the fourth hunt: the `generator` property on every graded function (each got full marks before), and a
    # bias gradient that loses its axis for one output unit, a loss that stops at 64 classes
    "softmax_jacobian seeds numpy's global generator (np.random.seed(0) left from a test)": (
        [("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)",
          "    np.random.seed(0)\n    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)")],
        {"jacobians_hidden", "chain_hidden", "public_primer"}),
    "gradient_check seeds Python's random": (
        [("    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))\n",
          "    import random\n    random.seed(0)\n"
          "    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))\n")],
        {"gradient_check_hidden", "public_gradcheck"}),
    "ffnn_forward seeds Python's random": (
        [("    B = contexts.shape[0]\n    e = embedding_forward(params",
          "    import random\n    random.seed(0)\n    B = contexts.shape[0]\n    e = embedding_forward(params")],
        {"ffnn_forward_hidden", "public_ffnn"}),
    "ffnn_loss_and_grads seeds numpy's global generator": (
        [("    B, k = contexts.shape\n    e = embedding_forward(E, contexts)",
          "    np.random.seed(0)\n    B, k = contexts.shape\n    e = embedding_forward(E, contexts)")],
        {"ffnn_grads_hidden", "public_ffnn", "train_steps_hidden", "public_train"}),
    "context_windows seeds numpy's global generator": (
        [("    ids = np.asarray(ids)\n    padded", "    np.random.seed(0)\n    ids = np.asarray(ids)\n    padded")],
        {"windows_hidden", "train_steps_hidden", "public_train"}),
    "cross_entropy picks each row's target with np.choose (64 classes at most)": (
        [("    return float(-logp[np.arange(len(targets)), targets].mean())",
          "    return float(-np.mean(np.choose(targets, logp.T)))")],
        {"cross_entropy_hidden"}),
    "linear_backward squeezes db (a scalar for one output unit)": (
        [("    db = dout.sum(axis=0)\n", "    db = np.squeeze(dout.sum(axis=0, keepdims=True))\n")],
        {"linear_hidden"}),
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
    "embedding_backward by np.add.at row by row": [
        ("    np.add.at(dE, ids, dout)\n", "    for i in range(len(ids)):\n        np.add.at(dE, ids[i], dout[i])\n")],
    "numerical_gradient on flat copies, halving after dividing by eps": [
        ("    x = np.array(x, dtype=np.float64)  # a copy we may change\n    grad = np.zeros_like(x)\n"
         "    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views\n    for i in range(flat_x.size):\n"
         "        old = flat_x[i]\n        flat_x[i] = old + eps\n        f_plus = f(x)\n        flat_x[i] = old - eps\n"
         "        f_minus = f(x)\n        flat_x[i] = old\n        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n"
         "    return grad\n",
         "    flat = np.asarray(x, dtype=np.float64).ravel()\n    out = []\n    for i in range(flat.size):\n"
         "        up, down = flat.copy(), flat.copy()\n        up[i] += eps\n        down[i] -= eps\n"
         "        out.append((f(up.reshape(np.shape(x))) - f(down.reshape(np.shape(x)))) / eps / 2)\n"
         "    return np.array(out).reshape(np.shape(x))\n")],
    "init_params with other draws, training with a fresh dict per step and an array of losses": [
        ('        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n',
         '        "E": 0.1 * rng.standard_normal((vocab_size, dim)),\n'),
        ('        "U": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden)) / np.sqrt(hidden),\n',
         '        "U": (2 * rng.random((vocab_size, hidden)) - 1) / np.sqrt(hidden),\n'),
        ("        for name in params:\n            params[name] -= lr * grads[name]\n        losses.append(float(loss))\n"
         "    return params, losses\n",
         "        params = {name: value - lr * grads[name] for name, value in params.items()}\n"
         "        losses.append(loss)\n    return params, np.array(losses)\n")],
    "context_windows by a loop over positions": [
        ("    ids = np.asarray(ids)\n    padded = np.concatenate([np.zeros(context, dtype=ids.dtype), ids])\n"
         "    contexts = np.stack([padded[i:i + len(ids)] for i in range(context)], axis=1)\n",
         "    ids = np.asarray(ids)\n    contexts = np.zeros((len(ids), context), dtype=np.int64)\n"
         "    for t in range(len(ids)):\n        for j in range(context):\n"
         "            if t - context + j >= 0:\n                contexts[t, j] = ids[t - context + j]\n")],
    "grad_logits_chain through the log-softmax Jacobian": [
        ("    dL_dp = -y / softmax(z)\n    return softmax_jacobian(z).T @ dL_dp\n",
         "    return log_softmax_jacobian(z).T @ (-y)\n")],
    "Jacobians by broadcasting (p[:, None] * (I - p[None, :]), I - p)": [
        ("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)\n",
         "    p = softmax(z)\n    return p[:, None] * (np.eye(p.size) - p[None, :])\n"),
        ("    p = softmax(z)\n    return np.eye(len(p)) - p[None, :]\n", "    return np.eye(len(z)) - softmax(z)\n")],
    "log_softmax with np.logaddexp.reduce": [
        (LOG_SOFTMAX, "    return z - np.logaddexp.reduce(z, axis=-1, keepdims=True)\n")],
    "embedding backward as a one-hot product, on flattened ids in the model": [
        ("    dE = embedding_backward(de.reshape(B, k, -1), contexts, E.shape[0])\n",
         "    dE = embedding_backward(de.reshape(B * k, -1), contexts.reshape(-1), E.shape[0])\n"),
        ("    dE = np.zeros((vocab_size, dout.shape[-1]))\n    np.add.at(dE, ids, dout)\n    return dE\n",
         "    d = dout.shape[-1]\n    onehot = np.eye(vocab_size)[np.asarray(ids).reshape(-1)]\n"
         "    return onehot.T @ dout.reshape(-1, d)\n")],
    "context_windows with sliding_window_view": [
        ("    contexts = np.stack([padded[i:i + len(ids)] for i in range(context)], axis=1)\n",
         "    contexts = np.lib.stride_tricks.sliding_window_view(padded, context)[:len(ids)]\n")],
    "init_params drawing U before W, with explicit bounds": [
        ('    return {\n        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n'
         '        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim)) / np.sqrt(context * dim),\n'
         '        "b": np.zeros(hidden),\n        "U": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden)) / np.sqrt(hidden),\n',
         '    E = 0.1 * rng.standard_normal((vocab_size, dim))\n'
         '    U = rng.uniform(-1 / np.sqrt(hidden), 1 / np.sqrt(hidden), (vocab_size, hidden))\n'
         '    bound = 1 / np.sqrt(context * dim)\n    W = rng.uniform(-bound, bound, (hidden, context * dim))\n'
         '    return {\n        "E": E,\n        "W": W,\n        "b": np.zeros(hidden),\n        "U": U,\n')],
    "minibatches as blocks of consecutive positions at random offsets, with replacement": [
        ("        batch = rng.integers(0, len(targets), size=batch_size)",
         "        first = rng.integers(0, len(targets) - batch_size + 1)\n"
         "        batch = np.arange(first, first + batch_size)")],
    "minibatches by rng.choice without replacement": [
        ("        batch = rng.integers(0, len(targets), size=batch_size)",
         "        batch = rng.choice(len(targets), size=batch_size, replace=False)")],
    "minibatches from shuffled epochs": [
        ("    rng = np.random.default_rng(seed + 1)\n",
         "    rng = np.random.default_rng(seed + 1)\n    order, at = rng.permutation(len(targets)), 0\n"),
        ("        batch = rng.integers(0, len(targets), size=batch_size)\n",
         "        if at + batch_size > len(order):\n            order, at = rng.permutation(len(targets)), 0\n"
         "        batch, at = order[at:at + batch_size], at + batch_size\n")],
    "ffnn_loss_and_grads with a stable softmax of its own (logsumexp per row) and np.tanh": [
        ("    h = tanh_forward(linear_forward(e, W, b))  # (B, H)\n", "    h = np.tanh(e @ W.T + b)  # (B, H)\n"),
        ("    loss = cross_entropy(z, targets)\n    dz = cross_entropy_grad(z, targets)  # (B, V)\n",
         "    top = z.max(axis=1, keepdims=True)\n    lse = top + np.log(np.exp(z - top).sum(axis=1, keepdims=True))  # (B, 1)\n"
         "    loss = float(np.mean(lse[:, 0] - z[np.arange(B), targets]))\n    dz = np.exp(z - lse)\n"
         "    dz[np.arange(B), targets] -= 1.0\n    dz /= B\n")],
    "train_ffnn as a while loop, updating in a fixed order, positions by rng.choice with replacement": [
        ("    losses = []\n    for _ in range(steps):\n        batch = rng.integers(0, len(targets), size=batch_size)\n",
         "    losses, step = [], 0\n    while step < steps:\n        step += 1\n"
         "        batch = rng.choice(len(targets), size=batch_size)\n"),
        ("        for name in params:\n            params[name] -= lr * grads[name]\n",
         "        for name in (\"b2\", \"U\", \"b\", \"W\", \"E\"):\n            params[name] -= lr * grads[name]\n")],
    "tanh_backward as (1 - h)(1 + h), linear_forward with np.dot": [
        ("    return dout * (1.0 - h ** 2)", "    return dout * (1.0 - h) * (1.0 + h)"),
        ("    return x @ W.T + b\n", "    return np.dot(x, W.T) + b\n")],
}


def edited(replacements) -> str:
    return edited_solution("backprop", replacements)


def grade(tmp_path, text, assignment=FAST, questions=None) -> dict[str, str]:
    """{name of a failing check: its feedback} for a submission text."""
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, assignment, questions=questions)
    assert report.results, "no checks ran"
    assert not any("grader could not finish" in r.output for r in report.results)
    return {r.name: r.output for r in report.results if not r.passed}


def failing_checks(tmp_path, text, assignment=FAST, questions=None) -> set[str]:
    return set(grade(tmp_path, text, assignment, questions))


# Where the symptom is specific, the feedback says the likely cause: (check, words it must contain).
FEEDBACK = {
    "SGD step with the wrong sign": ("train_steps_hidden", "a step along the gradient"),
    "SGD update rebinds a loop variable (parameters never change)": ("train_steps_hidden", "the initial parameters"),
    "minibatches drawn from numpy's global generator": ("train_steps_hidden", "randomness left on"),
    "softmax subtracts the maximum in place (changes the caller's logits)": ("softmax_hidden", "changed its argument"),
    "tanh_backward multiplies dout in place": ("tanh_hidden", "changed its argument"),
    "numerical_gradient ignores eps (a fixed step of 1e-6)": ("numerical_gradient_hidden", "use the eps argument"),
    "init_params in float32 to save memory": ("ffnn_init_hidden", "float32"),
    "tanh_forward by the exp formula (NaN for large inputs)": ("tanh_hidden", "use np.tanh"),
    "numerical_gradient never puts the perturbed entry back": ("numerical_gradient_hidden", "never put back"),
    "init_params re-creates the generator for each parameter (W and U share their draws)":
        ("ffnn_init_hidden", "re-created for each parameter"),
    "generator re-created at every step (the same minibatch every step)": ("train_minibatch_hidden", "same minibatch"),
    "batch_size ignored (always 128 positions)": ("train_minibatch_hidden", "batch_size positions"),
    "full-batch gradient descent (every position at every step)": ("train_minibatch_hidden", "whole stream"),
    "W and U drawn from 0 to the bound, not symmetric": ("ffnn_init_hidden", "not from 0"),
    "W's range from dim alone, not context * dim": ("ffnn_init_hidden", "1/sqrt(dim)"),
    "loss recorded after the update": ("train_steps_hidden", "after the update"),
    "train_ffnn ignores the start it is given": ("train_steps_hidden", "not from the `start` you were given"),
    "train_ffnn trains the start it is given in place": ("train_steps_hidden", "changed its argument `start`"),
    "minibatches as consecutive slices from the start of the stream": ("train_minibatch_hidden",
                                                                      "only part of the stream"),
    "minibatches drawn from the first half of the stream": ("train_minibatch_hidden", "only part of the stream"),
    "softmax without subtracting the max": ("primer_stable", "`softmax` (Q1) fails its own checks"),
    "cross_entropy as log(softmax + 1e-12)": ("public_cross_entropy", "Take the loss from log_softmax"),
    "log_softmax_jacobian as the softmax Jacobian divided by p (0 / 0 at +-1000)":
        ("public_primer", "never by dividing by p"),
    "init_params ignores its seed": ("public_ffnn", "with the seed you are given"),
    "relative_error with the spectral norm (ord=2 on a matrix)": ("public_gradcheck", "Euclidean norm over all entries"),
    "gradient_check differences with the default step, not its eps": ("public_gradcheck", "pass the eps you were given"),
    "gradient_check compares with 1e-6 instead of tol": ("public_gradcheck", "compare with tol"),
    "ffnn_forward: tanh as (e^a - e^-a) / (e^a + e^-a)": ("ffnn_forward_hidden", "inf / inf = NaN"),
    "ffnn_loss_and_grads: dz from a softmax shifted by the batch's one maximum": ("public_ffnn", "batch's one maximum"),
    "cross_entropy_grad: a softmax of its own shifted by the batch's one maximum": ("public_primer", "its own maximum"),
    "train_ffnn never draws the last window (integers(0, N - 1))": ("train_minibatch_hidden", "the last window"),
    "train_ffnn skips the first `context` windows (their contexts hold padding)": ("train_minibatch_hidden",
                                                                                   "the first window"),
    "train_ffnn trains on the first 250,000 windows only (a cap left from debugging)": ("train_minibatch_hidden",
                                                                                        "a cap left from debugging"),
    "train_ffnn halves the learning rate after 1,000 steps": ("train_steps_hidden", "constant lr at step 1002"),
    "train_ffnn prints the last loss after the loop (IndexError when steps=0)": ("train_steps_hidden", "steps=0"),
}


# Functions no other question calls: a variant that edits only these is graded on their question alone
# (the other questions' checks never run them), which keeps this file fast.
LEAVES = {"numerical_gradient": "5", "relative_error": "5", "gradient_check": "5", "context_windows": "6",
          "train_ffnn": "6"}


def edited_functions(replacements) -> set[str]:
    """Names of the staff solution's functions that the edits change."""
    import ast
    text = edited([])
    spans = [(node.lineno, node.end_lineno, node.name) for node in ast.parse(text).body
             if isinstance(node, ast.FunctionDef)]
    lines = {text[:text.index(old)].count("\n") + 1 for old, _ in replacements}
    return {name for line in lines for start, end, name in spans if start <= line <= end}


def questions_to_grade(replacements) -> set[str] | None:
    functions = edited_functions(replacements)
    return {LEAVES[f] for f in functions} if functions <= set(LEAVES) else None


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_bug_is_caught_by_exactly_its_checks(tmp_path, bug):
    replacements, expected = BUGS[bug]
    failed = grade(tmp_path, edited(replacements), questions=questions_to_grade(replacements))
    assert set(failed) == expected
    if bug in FEEDBACK:
        name, words = FEEDBACK[bug]
        assert words in failed[name]


@pytest.mark.parametrize("variant", sorted(CORRECT))
def test_correct_variant_gets_full_marks(tmp_path, variant):
    replacements = CORRECT[variant]
    assert failing_checks(tmp_path, edited(replacements), questions=questions_to_grade(replacements)) == set()


def test_public_checks_catch_most_bugs_the_hidden_ones_catch():
    """Public checks give real signal: of the bugs a hidden check catches, most fail a public one too."""
    hidden = [bug for bug, (_, fails) in BUGS.items() if any(not name.startswith("public_") for name in fails)]
    public = [bug for bug in hidden if any(name.startswith("public_") for name in BUGS[bug][1])]
    # 23 of 30 when written; 46 of 62 after the second hunt; 57 of 66 once the public checks took edge
    # cases (logits of +-1000 for the loss, tanh(+-1000), probabilities of 0, a second seed, eps and tol);
    # 63 of 80 after the third hunt (the saturated model and rows' maxima 750 apart are public; windows a
    # loop never draws, steps=0 and an lr schedule are hidden); 69 of 88 once every call through `pure` runs the
    # generator property, public and hidden alike (a bias gradient for one output unit and 100 classes are hidden)
    assert len(public) / len(hidden) >= 0.75


def test_every_bug_is_caught_in_its_own_question():
    """Each bug fails a check of the question of the function it edits (not only later questions)."""
    question_of = {name: fn.lmgrade_check.question for fn in BACKPROP.checks() for name in fn.lmgrade_check.uses}
    check_question = {fn.__name__: fn.lmgrade_check.question for fn in BACKPROP.checks()}
    for bug, (replacements, fails) in BUGS.items():
        functions = edited_functions(replacements)
        assert functions and {question_of[f] for f in functions} <= {check_question[name] for name in fails}, bug


def test_leaf_functions_are_called_by_no_other_function():
    """What makes grading a leaf's variants on its question alone sound."""
    import ast
    for node in ast.parse(edited([])).body:
        if isinstance(node, ast.FunctionDef):
            called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            for leaf in called & set(LEAVES):
                assert LEAVES.get(node.name) == LEAVES[leaf], (node.name, leaf)


CHEAT = """
def numerical_gradient(f, x, eps=1e-6):
    x = np.array(x, dtype=np.float64)
    for owner in (f, getattr(f, "__self__", None)):
        if callable(getattr(owner, "grad", None)):
            return owner.grad(x)
    cells = [cell.cell_contents for cell in (getattr(f, "__closure__", None) or ())]
    arrays = sorted((c for c in cells if isinstance(c, np.ndarray)), key=lambda a: -a.ndim)
    if len(arrays) == 2:
        A, c = arrays
        flat = x.reshape(-1)
        return (A.T @ np.cos(A @ flat + c) + flat).reshape(x.shape)
    raise RuntimeError("nothing to dig out")
"""


@pytest.mark.usefixtures("policy_off")  # the layer beneath the policy
def test_numerical_gradient_that_digs_out_the_exact_gradient_gains_nothing(tmp_path):
    """The function a gradient checker is handed has no `.grad`, and what can be dug out of its closure
    (the exact gradient) is not what the grader compares with: its own central differences at the
    step the student was given."""
    text = edited([]) + CHEAT  # the later definition wins
    failed = grade(tmp_path, text, questions={"5"})
    assert set(failed) == {"public_gradcheck", "numerical_gradient_hidden", "gradient_check_hidden"}
    assert "the exact gradient" in failed["numerical_gradient_hidden"]


def test_wrong_sign_sgd_fails_the_shakespeare_threshold(tmp_path):
    text = edited(BUGS["SGD step with the wrong sign"][0])
    path = tmp_path / "submission.py"
    path.write_text(text)
    report = runner.grade(path, BACKPROP, questions={"6"})
    failed = {r.name: r.output for r in report.results if not r.passed}
    assert set(failed) == {"public_train", "train_steps_hidden", SLOW}
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
    assert {r.name: r.passed for r in report.results} == {"public_train": True, "windows_hidden": True,
                                                          "train_steps_hidden": True, "train_minibatch_hidden": True,
                                                          SLOW: True}
    assert "threshold" in next(r.output for r in report.results if r.name == SLOW)
