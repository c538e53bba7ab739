# %% [markdown]
# # Homework 2: backpropagation by hand, and a feedforward neural language model
#
# Deep-learning libraries compute gradients for us, and later in the course we will let them. In
# this homework you compute them **yourself**, in plain numpy, so that nothing about backpropagation
# stays magic. You will:
#
# | part | what you write | idea from the lecture |
# | --- | --- | --- |
# | Q1 | `softmax`, `log_softmax`, `cross_entropy` | softmax, numerical stability, cross-entropy loss |
# | Q2 | `softmax_jacobian`, `log_softmax_jacobian`, `grad_logits_chain`, `cross_entropy_grad` | the backprop primer: Jacobians and the chain rule |
# | Q3 | `linear_forward/backward`, `tanh_forward/backward`, `embedding_forward/backward` | layers as forward and backward functions |
# | Q4 | `init_params`, `ffnn_forward`, `ffnn_loss_and_grads` | the feedforward (Bengio-style) language model |
# | Q5 | `numerical_gradient`, `relative_error`, `gradient_check` | gradient checking with finite differences |
# | Q6 | `context_windows`, `train_ffnn` | stochastic gradient descent on Shakespeare |
#
# At the end you train your model on Shakespeare, plot its loss curve and compare its perplexity
# with the n-gram models of Homework 1.
#
# **Rules.** Use numpy only (no torch, no autograd library): the point is to write every gradient.
# Work in float64 (numpy's default): the grader compares your gradients with exact ones to about
# seven significant digits, and float64 inputs must give float64 results. No function may change
# its arguments (the grader checks): `z -= z.max()` or `dout *= ...` on an array you were given
# changes the caller's array, so compute new arrays instead (`z = z - z.max(...)`).
#
# **Graded code is plain Python the grader can read.** Graded cells may import only `numpy`, `math`,
# `random`, `collections`, `itertools`, `functools`, `operator`, `enum`, `typing`, `dataclasses`,
# `warnings`, `copy`, `bisect`, `heapq`, `time`, `tqdm`, `abc`, `statistics` and `contextlib`.
# Ordinary Python is welcome (classes, dataclasses, enums, `functools.partial`, `operator.mul`,
# `getattr`/`hasattr` with a literal name, `setattr(self, name, ...)` in a method looping over
# literal names, `type(self).__name__`). Not allowed: other reflection (`vars`, `globals`,
# `__dict__` and double-underscore names beyond `__init__`, `__repr__`, `__name__` and the like),
# code made or loaded at run time (`eval`, `exec`, `pickle`, `np.load`, ...), private names of a
# library (a leading `_`), and changing a library (`np.exp = ...`). Use a module only as
# `module.name`: `import numpy as np`, not `xp = np` or `def f(z, xp=np)`. The grader reads your
# graded cells before it runs anything: a check whose code breaks these rules is not graded, and a
# statement that breaks them while the cells load is not run and costs only the checks of the names
# it touches; getting round them counts as not attempting the question.
#
# **How grading works.** Only the cells marked as *graded* are graded, and the grader finds your
# code by the function names, so do not rename them. A graded cell must work on its own: keep its
# imports inside it (`numpy` is all you need), do not use variables from ungraded cells, and do not
# load data, train or print there. Graded cells may call each other's functions freely, and later
# parts are meant to reuse earlier ones. Replace each `raise NotImplementedError(...)` with your code.
#
# **Public checks.** Save the notebook first (the checker reads the saved file), then run the cell
# below. The grader also runs hidden checks (random shapes, extreme values, every keyword argument,
# comparisons with exact gradients), so passing every public check is a good sign but not a guarantee.

# %%
from autograder import check_notebook
check_notebook(assignment="backprop")  # finds this notebook; add question=2 to check one question

# %% [markdown]
# ## Q1. Softmax and cross-entropy
#
# A classifier (and a language model is one: its classes are the words of the vocabulary) turns a
# vector of scores $z \in \mathbb{R}^V$, the **logits**, into probabilities with the softmax
#
# $$\hat y_i = \mathrm{softmax}(z)_i = \frac{e^{z_i}}{\sum_{j} e^{z_j}}.$$
#
# **Stability.** In float64, `np.exp(710)` is already `inf`, and `np.exp(-750)` is exactly 0, so
# the formula as written fails for large logits ($\infty / \infty$ is NaN). The cure: softmax does
# not change when the same constant $c$ is subtracted from every logit (the factor $e^{-c}$
# cancels). With $c = \max_j z_j$ the largest exponent is $e^0 = 1$: nothing overflows, and the
# sum is at least 1.
#
# **Log-softmax.** We mostly need $\log \hat y$, and `np.log(softmax(z))` is $\log 0 = -\infty$
# as soon as a probability underflows, although the true value, e.g. $-2000$, is a perfectly good
# float. Take the log analytically instead:
#
# $$\log \hat y_i = (z_i - c) - \log \sum_j e^{z_j - c}, \qquad c = \max_j z_j .$$
#
# **Cross-entropy.** For a true class $t$ (one-hot $y$) the loss is
# $L = -\sum_i y_i \log \hat y_i = -\log \hat y_t$. For a batch of $B$ examples we use the **mean**
# over the batch, as every library does: $L = -\frac1B \sum_b \log \hat y_{b, t_b}$.
#
# All three functions work along the **last axis**: `z` may be a vector `(V,)`, a batch `(B, V)`,
# or have more leading axes.

# %% tags=["graded"]
import numpy as np


def softmax(z: np.ndarray) -> np.ndarray:
    """Softmax along the last axis, numerically stable for any finite logits.

    z: array of shape (..., V). Returns an array of the same shape whose
    entries are in [0, 1] and sum to 1 along the last axis. Subtract the
    maximum of each row (keepdims=True) before exponentiating.

    Example:
        softmax(np.array([0.0, np.log(3.0)])) -> [0.25, 0.75]
        softmax(np.array([1000.0, 0.0]))    -> [1.0, 0.0]  (no NaN, no warning)
    """
    # BEGIN SOLUTION: softmax: subtract the row maximum (keepdims=True), exponentiate, divide by the row sum
    z = np.asarray(z, dtype=np.float64)
    exp = np.exp(z - z.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)
    # END SOLUTION


def log_softmax(z: np.ndarray) -> np.ndarray:
    """log(softmax(z)) along the last axis, computed without ever taking log(0).

    z: array of shape (..., V). Returns (z - c) - log(sum(exp(z - c))) with
    c the maximum along the last axis; the result is finite for finite z.

    Example:
        log_softmax(np.array([1000.0, -1000.0])) -> [0.0, -2000.0]
    """
    # BEGIN SOLUTION: log_softmax: shift by the row maximum, then subtract the log of the row sum of exp
    z = np.asarray(z, dtype=np.float64)
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    # END SOLUTION


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> float:
    """Mean cross-entropy of a batch: -(1/B) * sum_b log softmax(logits[b])[targets[b]].

    logits: (B, V) floats; targets: (B,) integer class ids in [0, V).
    Returns a float. Use log_softmax, not log(softmax(...)).

    Example:
        cross_entropy(np.array([[0.0, 0.0]]), np.array([1])) == log(2) ~ 0.6931
    """
    # BEGIN SOLUTION: cross_entropy: log_softmax, pick each row's target column with fancy indexing, negate the mean
    logp = log_softmax(logits)
    return float(-logp[np.arange(len(targets)), targets].mean())
    # END SOLUTION


# %% [markdown]
# Try it (not graded). The naive formula breaks on large logits; yours should not:

# %%
extreme = np.array([[1000.0, 0.0, -1000.0], [-5.0, -5.0, -5.0]])
with np.errstate(over="ignore", invalid="ignore"):
    print("naive:      ", np.exp(extreme) / np.exp(extreme).sum(axis=-1, keepdims=True))
print("softmax:    ", softmax(extreme))
print("log_softmax:", log_softmax(extreme))
print("loss:       ", cross_entropy(extreme, np.array([2, 0])), "(expected (2000 + log 3) / 2 =", (2000 + np.log(3)) / 2, ")")

# %% [markdown]
# ## Q2. The backpropagation primer
#
# The lecture's primer is the smallest model with everything in it: one linear layer, a softmax
# and the cross-entropy loss, for one example $x \in \mathbb{R}^d$ with target distribution $y$
# (one-hot for a true class):
#
# $$z = Wx, \qquad \hat y = \mathrm{softmax}(z), \qquad L = -y \cdot \log \hat y .$$
#
# Backpropagation applies the chain rule from the loss backwards, one factor per step.
#
# **Step 1: the loss.** $\dfrac{\partial L}{\partial \hat y_i} = -\dfrac{y_i}{\hat y_i}$.
#
# **Step 2: the softmax Jacobian.** The Jacobian of a function $f: \mathbb{R}^n \to \mathbb{R}^m$
# is the $m \times n$ matrix $J_{ij} = \partial f_i / \partial z_j$: **row $i$ is output $i$**,
# column $j$ is input $j$. For the softmax,
#
# $$J_{ij} = \frac{\partial \hat y_i}{\partial z_j} = \hat y_i(\delta_{ij} - \hat y_j),
# \qquad J = \mathrm{diag}(\hat y) - \hat y \hat y^\top .$$
#
# **Step 3: the chain rule** multiplies by the *transposed* Jacobian:
# $\dfrac{\partial L}{\partial z_j} = \sum_i \dfrac{\partial L}{\partial \hat y_i}\,J_{ij}$, that is,
# $\nabla_z L = J^\top \nabla_{\hat y} L$. (The softmax Jacobian happens to be symmetric, so the
# transpose does not show here. It does show for most other functions: write it anyway.)
#
# **The collapse.** Multiply it out, using $\sum_i y_i = 1$:
#
# $$\frac{\partial L}{\partial z_j} = \sum_i \left(-\frac{y_i}{\hat y_i}\right)\hat y_i(\delta_{ij} - \hat y_j)
# = -y_j + \hat y_j \sum_i y_i = \hat y_j - y_j .$$
#
# The whole chain collapses to $\nabla_z L = \hat y - y$: "prediction minus truth". That is what
# everyone implements, because it is cheaper ($O(V)$ instead of $O(V^2)$) and stable (no division
# by a tiny $\hat y_i$). You will write both and see that they agree.
#
# **The log-softmax Jacobian** is the one where the transpose matters. Since
# $\log \hat y_i = z_i - \log \sum_k e^{z_k}$,
#
# $$\frac{\partial \log \hat y_i}{\partial z_j} = \delta_{ij} - \hat y_j, \qquad
# J_{\log} = I - \mathbf{1}\hat y^\top,$$
#
# every row is $e_i - \hat y$, and the matrix is **not** symmetric. With numpy broadcasting,
# `p[None, :]` is a row that is repeated down the rows, and `p[:, None]` is a column that is
# repeated across the columns. Choose the one that gives $J_{ij} = \delta_{ij} - \hat y_j$.
#
# **A batch.** For logits `(B, V)` with integer targets and the *mean* loss of Q1, every row
# contributes $\frac1B(\hat y_b - y_b)$: the $\frac1B$ of the mean goes into the gradient too.

# %% tags=["graded"]
import numpy as np


def softmax_jacobian(z: np.ndarray) -> np.ndarray:
    """The Jacobian of softmax at one logit vector z (V,): J[i, j] = d softmax(z)_i / d z_j.

    Returns a (V, V) array equal to diag(p) - outer(p, p) with p = softmax(z).

    Example:
        softmax_jacobian(np.zeros(2)) -> [[0.25, -0.25], [-0.25, 0.25]]
    """
    # BEGIN SOLUTION: softmax_jacobian: p = softmax(z); then np.diag and np.outer
    p = softmax(z)
    return np.diag(p) - np.outer(p, p)
    # END SOLUTION


def log_softmax_jacobian(z: np.ndarray) -> np.ndarray:
    """The Jacobian of log_softmax at z (V,): J[i, j] = d log softmax(z)_i / d z_j = delta_ij - p_j.

    Returns a (V, V) array: the identity minus a matrix whose every ROW is p.
    It is not symmetric.

    Example (p = softmax(z) = [0.25, 0.75]):
        log_softmax_jacobian(np.array([0.0, np.log(3.0)])) -> [[0.75, -0.75], [-0.25, 0.25]]
    """
    # BEGIN SOLUTION: log_softmax_jacobian: identity minus p broadcast so that column j holds p_j
    p = softmax(z)
    return np.eye(len(p)) - p[None, :]
    # END SOLUTION


def grad_logits_chain(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """dL/dz for L = -y . log(softmax(z)), computed the long way, by the chain rule.

    z: logits (V,); y: target distribution (V,) (non-negative, sums to 1).
    First dL/dp = -y / p with p = softmax(z), then multiply by the TRANSPOSED
    softmax Jacobian: J.T @ dL_dp. Do not use the collapsed form p - y here.

    Example:
        grad_logits_chain(np.zeros(2), np.array([0.0, 1.0])) -> [0.5, -0.5]
    """
    # BEGIN SOLUTION: grad_logits_chain: dL_dp = -y / softmax(z), then the transposed softmax_jacobian times dL_dp
    dL_dp = -y / softmax(z)
    return softmax_jacobian(z).T @ dL_dp
    # END SOLUTION


def cross_entropy_grad(logits: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Gradient of cross_entropy(logits, targets) (the batch MEAN) w.r.t. logits.

    logits: (B, V); targets: (B,) integer ids. Returns (B, V): row b is
    (softmax(logits[b]) - onehot(targets[b])) / B. Stable for large logits.

    Example:
        cross_entropy_grad(np.zeros((2, 2)), np.array([0, 1]))
        -> [[-0.25, 0.25], [0.25, -0.25]]
    """
    # BEGIN SOLUTION: cross_entropy_grad: softmax of the logits, subtract 1 at each row's target, divide by the batch size
    B = logits.shape[0]
    grad = softmax(logits)
    grad[np.arange(B), targets] -= 1.0
    return grad / B
    # END SOLUTION


# %% [markdown]
# **Both ways agree** (not graded). The chain rule through the Jacobian and the collapsed form
# $\hat y - y$ give the same gradient, for a one-hot target and for a soft one. The Jacobian
# route costs a $V \times V$ matrix and divides by $\hat y$; the collapsed one does neither.

# %%
rng = np.random.default_rng(0)
z = rng.normal(size=6)
for name, y in [("one-hot", np.eye(6)[2]), ("soft", softmax(rng.normal(size=6)))]:
    chain, collapsed = grad_logits_chain(z, y), softmax(z) - y
    print(f"{name:8s} chain     {np.round(chain, 6)}")
    print(f"{'':8s} collapsed {np.round(collapsed, 6)}   max difference {np.abs(chain - collapsed).max():.1e}")
J = log_softmax_jacobian(z)
print("log-softmax Jacobian symmetric?", np.allclose(J, J.T), "  rows sum to 0?", np.allclose(J.sum(axis=1), 0))

# %% [markdown]
# ## Q3. Layers with a forward and a backward
#
# A network is a chain of **layers**. Each layer has a *forward* function (inputs to outputs) and
# a *backward* function: given $\partial L / \partial(\text{output})$ (called `dout`, same shape as
# the output), it returns $\partial L / \partial(\text{each input and parameter})$, each with the
# shape of the thing it is the gradient of. Backpropagation is then just calling the backward
# functions in reverse order.
#
# **Linear.** For a batch of rows $X$ `(B, d_in)`, weights $W$ `(d_out, d_in)` and bias $b$
# `(d_out,)` (the primer's $z = Wx$, one row per example, as in `torch.nn.Linear`):
#
# $$Z = XW^\top + b, \qquad \frac{\partial L}{\partial X} = \frac{\partial L}{\partial Z} W, \qquad
# \frac{\partial L}{\partial W} = \Big(\frac{\partial L}{\partial Z}\Big)^{\!\top} X, \qquad
# \frac{\partial L}{\partial b} = \sum_{\text{rows}} \frac{\partial L}{\partial Z}.$$
#
# Where does $\partial L/\partial W$ come from? For one example, $z_i = \sum_k W_{ik} x_k$, so
# $\partial z_i / \partial W_{jk} = \delta_{ij}\,x_k$: the Jacobian $\partial z / \partial W$ is a
# 3-index array that is almost all zeros. Contract it with $\partial L / \partial z$ and only
# $i = j$ survives: $\partial L / \partial W_{jk} = (\partial L/\partial z_j)\, x_k$, the outer
# product $(\hat y - y)\,x^\top$ in the primer. Over a batch, each example adds its own outer
# product, which is the matrix product above. Likewise the bias is added to every row, so its
# gradient sums over the rows.
#
# **Tanh.** $h = \tanh(a)$ elementwise, and $\tanh'(a) = 1 - \tanh^2(a) = 1 - h^2$, so the
# backward needs only the forward's output $h$: $\partial L/\partial a = \partial L/\partial h \odot (1 - h^2)$.
#
# **Embedding.** An embedding matrix $E$ `(V, d)` maps a word id to its row; `E[ids]` looks up a
# whole array of ids at once (shape `ids.shape + (d,)`). The lookup copies rows, so the backward
# sends each position's gradient back to the row it came from, and **a word that occurs several
# times in the batch collects the sum of all its gradients**. `dE[ids] = dout` keeps only one of
# them (numpy's fancy assignment does not add up repeats); `np.add.at(dE, ids, dout)` adds.

# %% tags=["graded"]
import numpy as np


def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x (B, d_in), W (d_out, d_in), b (d_out,) -> x @ W.T + b, shape (B, d_out)."""
    # BEGIN SOLUTION: linear_forward: one matrix product with the transposed weights, plus the bias
    return x @ W.T + b
    # END SOLUTION


def linear_backward(dout: np.ndarray, x: np.ndarray, W: np.ndarray):
    """Backward of linear_forward. dout: dL/d(output), (B, d_out).

    Returns (dx, dW, db) with the shapes of x (B, d_in), W (d_out, d_in) and
    b (d_out,). db sums over the batch.
    """
    # BEGIN SOLUTION: linear_backward: dx = dout @ W, dW = dout.T @ x, db = the sum of dout over axis 0
    dx = dout @ W
    dW = dout.T @ x
    db = dout.sum(axis=0)
    return dx, dW, db
    # END SOLUTION


def tanh_forward(a: np.ndarray) -> np.ndarray:
    """Elementwise tanh."""
    # BEGIN SOLUTION: tanh_forward: numpy has it
    return np.tanh(a)
    # END SOLUTION


def tanh_backward(dout: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Backward of tanh given its OUTPUT h = tanh(a): returns dL/da = dout * (1 - h**2)."""
    # BEGIN SOLUTION: tanh_backward: elementwise, with the derivative written in terms of h
    return dout * (1.0 - h ** 2)
    # END SOLUTION


def embedding_forward(E: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Rows of E (V, d) for integer ids of any shape: returns shape ids.shape + (d,)."""
    # BEGIN SOLUTION: embedding_forward: fancy indexing
    return E[ids]
    # END SOLUTION


def embedding_backward(dout: np.ndarray, ids: np.ndarray, vocab_size: int) -> np.ndarray:
    """Backward of embedding_forward: dE of shape (vocab_size, d).

    dout has shape ids.shape + (d,). Row v of dE is the SUM of dout over all
    positions where ids == v (zero for ids that do not occur).
    """
    # BEGIN SOLUTION: embedding_backward: start from zeros and use np.add.at, which adds repeated indices
    dE = np.zeros((vocab_size, dout.shape[-1]))
    np.add.at(dE, ids, dout)
    return dE
    # END SOLUTION


# %% [markdown]
# The primer once more (not graded): with the linear layer's backward, the gradient of the
# primer's loss with respect to $W$ is the outer product $(\hat y - y)\,x^\top$.

# %%
rng = np.random.default_rng(1)
W0, x0, t0 = rng.normal(size=(5, 3)), rng.normal(size=(1, 3)), np.array([4])
z0 = linear_forward(x0, W0, np.zeros(5))
_, dW0, _ = linear_backward(cross_entropy_grad(z0, t0), x0, W0)
print("max |dW - outer(p - y, x)| =", np.abs(dW0 - np.outer(softmax(z0[0]) - np.eye(5)[4], x0[0])).max())
print("embedding backward with a repeated id:",
      embedding_backward(np.ones((3, 2)), np.array([1, 1, 0]), 3).tolist())

# %% [markdown]
# ## Q4. A feedforward neural language model
#
# An n-gram model treats every word as an unrelated symbol, so what it learns about "the king" it
# cannot use for "the queen". Bengio et al. (2003) gave every word a learned vector, an
# **embedding**, and predicted the next word with a small neural network of the embeddings of the
# previous words. With a context of two words ($k = 2$):
#
# $$e = [E x_{t-2};\ E x_{t-1}], \qquad h = \tanh(W e + b), \qquad z = U h + b_2, \qquad
# \hat y = \mathrm{softmax}(z),$$
#
# where $E x$ is the embedding (row of $E$) of word $x$ and $[\cdot\,;\cdot]$ concatenates. The
# loss is the cross-entropy of the next word $x_t$. Parameters, for vocabulary size $V$, embedding
# size $d$, hidden size $H$ and context length $k$:
#
# | name | shape | role |
# | --- | --- | --- |
# | `E` | `(V, d)` | word embeddings |
# | `W` | `(H, k*d)` | hidden layer weights |
# | `b` | `(H,)` | hidden layer bias |
# | `U` | `(V, H)` | output weights |
# | `b2` | `(V,)` | output bias |
#
# For a batch, `contexts` is an integer array `(B, k)` whose row holds the ids of the $k$ previous
# words, oldest first, and `targets` `(B,)` holds the next words. `E[contexts]` has shape
# `(B, k, d)`; reshaped to `(B, k*d)` it is exactly the concatenation above.
#
# **The backward pass** runs the same steps in reverse, with your Q2 and Q3 functions:
# `dz` from the cross-entropy, then the output layer (`dh`, `dU`, `db2`), the tanh, the hidden
# layer (`de`, `dW`, `db`), and finally `de` reshaped back to `(B, k, d)` into the embedding
# backward. Note that $h$ feeds the output layer, so the output layer's `x` is $h$.
#
# **Initialization** (random, but small: large initial weights saturate the tanh, where its
# gradient vanishes): `E` from a normal with standard deviation 0.1, `W` uniform in
# $\pm 1/\sqrt{kd}$, `U` uniform in $\pm 1/\sqrt{H}$, both biases zero, all drawn from
# `np.random.default_rng(seed)`, so that the same seed gives the same parameters.

# %% tags=["graded"]
import numpy as np


def init_params(vocab_size: int, dim: int, hidden: int, context: int = 2, seed: int = 0) -> dict:
    """Random initial parameters of the feedforward LM, as a dict of float64 arrays.

    Keys and shapes: E (V, dim) ~ Normal(0, 0.1); W (hidden, context*dim) ~
    Uniform(-1/sqrt(context*dim), +1/sqrt(context*dim)); b (hidden,) zeros;
    U (V, hidden) ~ Uniform(-1/sqrt(hidden), +1/sqrt(hidden)); b2 (V,) zeros.
    Draw with rng = np.random.default_rng(seed): the same seed gives the same parameters.
    """
    # BEGIN SOLUTION: init_params: one default_rng(seed); rng.normal and rng.uniform with the scales above; np.zeros for the biases
    rng = np.random.default_rng(seed)
    return {
        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),
        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim)) / np.sqrt(context * dim),
        "b": np.zeros(hidden),
        "U": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden)) / np.sqrt(hidden),
        "b2": np.zeros(vocab_size),
    }
    # END SOLUTION


def ffnn_forward(params: dict, contexts: np.ndarray) -> np.ndarray:
    """Logits (B, V) of the feedforward LM for integer contexts (B, k).

    e = E[contexts] reshaped to (B, k*d); h = tanh(e @ W.T + b); z = h @ U.T + b2.
    """
    # BEGIN SOLUTION: ffnn_forward: embedding_forward, reshape, linear_forward, tanh_forward, linear_forward
    B = contexts.shape[0]
    e = embedding_forward(params["E"], contexts).reshape(B, -1)
    h = tanh_forward(linear_forward(e, params["W"], params["b"]))
    return linear_forward(h, params["U"], params["b2"])
    # END SOLUTION


def ffnn_loss_and_grads(params: dict, contexts: np.ndarray, targets: np.ndarray):
    """Mean cross-entropy of the next words and its gradient w.r.t. every parameter.

    params: dict as returned by init_params; contexts: (B, k) ints; targets: (B,) ints.
    Returns (loss, grads): loss a float, grads a dict with the same keys and
    shapes as params. Run the forward pass keeping what the backward needs,
    then the backward pass with your Q2 and Q3 functions.
    """
    # BEGIN SOLUTION: ffnn_loss_and_grads: forward keeping e and h; cross_entropy_grad, then linear, tanh, linear and embedding backward in that order
    E, W, b, U, b2 = params["E"], params["W"], params["b"], params["U"], params["b2"]
    B, k = contexts.shape
    e = embedding_forward(E, contexts).reshape(B, -1)  # (B, k*d)
    h = tanh_forward(linear_forward(e, W, b))  # (B, H)
    z = linear_forward(h, U, b2)  # (B, V)
    loss = cross_entropy(z, targets)
    dz = cross_entropy_grad(z, targets)  # (B, V)
    dh, dU, db2 = linear_backward(dz, h, U)
    da = tanh_backward(dh, h)  # (B, H)
    de, dW, db = linear_backward(da, e, W)
    dE = embedding_backward(de.reshape(B, k, -1), contexts, E.shape[0])
    return loss, {"E": dE, "W": dW, "b": db, "U": dU, "b2": db2}
    # END SOLUTION


# %% [markdown]
# A quick look (not graded): a freshly initialized model predicts every word with probability
# about $1/V$, so its loss is close to $\log V$.

# %%
toy_params = init_params(vocab_size=10, dim=4, hidden=8, context=2, seed=0)
toy_contexts, toy_targets = np.array([[1, 2], [2, 3], [3, 1]]), np.array([3, 1, 2])
toy_loss, toy_grads = ffnn_loss_and_grads(toy_params, toy_contexts, toy_targets)
print(f"loss {toy_loss:.4f} vs log V = {np.log(10):.4f}")
print({name: g.shape for name, g in toy_grads.items()})

# %% [markdown]
# ## Q5. Gradient checking
#
# How do you know that a hand-written gradient is right? Compare it with the definition of the
# derivative. For a scalar function $f$ and each entry $x_i$,
#
# $$\frac{\partial f}{\partial x_i} \approx \frac{f(x + \varepsilon e_i) - f(x - \varepsilon e_i)}{2\varepsilon}.$$
#
# This **central difference** has error $O(\varepsilon^2)$, while the one-sided
# $\big(f(x + \varepsilon e_i) - f(x)\big)/\varepsilon$ has error $O(\varepsilon)$: with
# $\varepsilon = 10^{-6}$, about $10^{-12}$ against $10^{-6}$. The step must not be too small
# either, because $f$ itself is only accurate to about $10^{-16}$ (relative), and dividing by
# $2\varepsilon$ magnifies that rounding error. In float64, $\varepsilon$ around $10^{-6}$ to
# $10^{-5}$ balances the two. (In float32 nothing works well: check gradients in float64.)
#
# To compare the analytic gradient $a$ with the numerical one $n$ we use one number that does
# not depend on the gradient's scale, the **relative error**
#
# $$\mathrm{rel}(a, n) = \frac{\lVert a - n\rVert}{\max(\lVert a\rVert + \lVert n\rVert,\ 10^{-12})}$$
#
# with $\lVert\cdot\rVert$ the Euclidean norm over all entries. A correct float64 gradient gives
# about $10^{-8}$ or less; a wrong one typically $10^{-4}$ to $1$.

# %% tags=["graded"]
import numpy as np


def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central-difference gradient of a scalar function f at x (float64 array of any shape).

    Entry i is (f(x + eps*e_i) - f(x - eps*e_i)) / (2*eps), with the eps given.
    Returns a float64 array shaped like x. Work on a float64 copy of x (the
    caller's x is not modified), and put each entry back after perturbing it.
    Calls f 2 * x.size times.
    """
    # BEGIN SOLUTION: numerical_gradient: loop over the flat entries of a float64 copy; evaluate f at +eps and -eps, restore, divide by 2*eps
    x = np.array(x, dtype=np.float64)  # a copy we may change
    grad = np.zeros_like(x)
    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views
    for i in range(flat_x.size):
        old = flat_x[i]
        flat_x[i] = old + eps
        f_plus = f(x)
        flat_x[i] = old - eps
        f_minus = f(x)
        flat_x[i] = old
        flat_grad[i] = (f_plus - f_minus) / (2 * eps)
    return grad
    # END SOLUTION


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / max(||a|| + ||b||, 1e-12), Euclidean norms over all entries, as a float."""
    # BEGIN SOLUTION: relative_error: np.linalg.norm of the difference over the sum of the norms, guarded by 1e-12
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1e-12))
    # END SOLUTION


def gradient_check(f, x: np.ndarray, analytic_grad: np.ndarray, eps: float = 1e-6, tol: float = 1e-6):
    """Compare an analytic gradient of f at x with numerical_gradient(f, x, eps).

    Returns (ok, error): error = relative_error(analytic_grad, numerical), a
    float; ok = error <= tol, a bool. A wrong gradient must give ok == False.
    """
    # BEGIN SOLUTION: gradient_check: numerical_gradient, then relative_error, then compare with tol
    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))
    return bool(error <= tol), error
    # END SOLUTION


# %% [markdown]
# Now check every gradient of your language model with your checker (not graded). Each call of
# `loss_of` puts one perturbed parameter array into a copy of the parameters and returns the loss.

# %%
check_params = init_params(vocab_size=7, dim=3, hidden=5, context=2, seed=1)
check_contexts, check_targets = np.array([[1, 2], [2, 2], [6, 1], [1, 2]]), np.array([2, 0, 1, 6])
_, check_grads = ffnn_loss_and_grads(check_params, check_contexts, check_targets)
for name in check_params:
    def loss_of(value, name=name):
        return ffnn_loss_and_grads({**check_params, name: value}, check_contexts, check_targets)[0]
    ok, error = gradient_check(loss_of, check_params[name], check_grads[name])
    print(f"{name:3s} {'ok   ' if ok else 'WRONG'} relative error {error:.1e}")
ok, error = gradient_check(loss_of, check_params["b2"], 1.01 * check_grads["b2"])
print(f"a gradient 1% too large: {'ok' if ok else 'flagged'}, relative error {error:.1e}")

# %% tags=["figure"]
import matplotlib.pyplot as plt

def loss_of_w(value):
    return ffnn_loss_and_grads({**check_params, "W": value}, check_contexts, check_targets)[0]

steps = np.logspace(-13, -1, 25)
errors = [gradient_check(loss_of_w, check_params["W"], check_grads["W"], eps=eps)[1] for eps in steps]
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.loglog(steps, errors, marker="o")
ax.set(xlabel="step eps", ylabel="relative error of the gradient of W", title="Gradient check of W in float64")
fig.tight_layout()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 1: the step of a gradient check
#
# Your gradient of `W` is right, yet the relative error in the plot is far from 0 for large and for
# tiny steps. Describe the curve: which error dominates on each side of the minimum, what slope
# each side has on the log-log axes and why, and where the minimum lies. Which step would you use
# in float64, and what would change in float32?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* On the right the truncation error of the central difference dominates: it is
# $O(\varepsilon^2)$, a slope of about 2 (the error grows a hundredfold per decade of $\varepsilon$). On
# the left, rounding dominates: $f$ is known only to about $10^{-16}$ relative, and dividing by
# $2\varepsilon$ magnifies that, an error of order $10^{-16}/\varepsilon$, a slope of $-1$. The minimum is
# where the two meet: theory puts it near $(10^{-16})^{1/3} \approx 10^{-5}$ times a factor set by the
# curvature of $f$; here it is at $10^{-5}$ to $10^{-4}$, with an error of about $10^{-10}$. Any step
# from $10^{-6}$ to $10^{-4}$ is good. In float32 the rounding level is
# $10^{-7}$, so the minimum moves to $\varepsilon \approx 10^{-2}$ with an error of about $10^{-4}$, too
# close to what a real bug gives: check gradients in float64.

# %% [markdown]
# ## Q6. Training on Shakespeare with SGD
#
# **The data** is the Shakespeare of Homework 1 as one long stream of word ids: each verse line's
# words (tokenized as in Homework 1) followed by `</s>`. To keep training fast we cap the
# vocabulary at the 1,998 most frequent training words plus `</s>` (id 0) and `<unk>` (id 1),
# so $V = 2000$; about 10% of the validation words become `<unk>`.
#
# **Windows.** The model predicts every position $t$ of the stream from the $k$ ids before it.
# At the very start there are fewer than $k$ previous ids: pretend the stream is preceded by $k$
# copies of `</s>` (id 0), the end of an imaginary previous line. So `context_windows` turns a
# stream of $N$ ids into `contexts` `(N, k)` and `targets` `(N,)`, one row per position:
#
# `ids = [5, 6, 7]`, $k = 2$ $\;\to\;$ `contexts = [[0, 0], [0, 5], [5, 6]]`, `targets = [5, 6, 7]`.
#
# **Stochastic gradient descent.** The full gradient over 900k positions is expensive and, early
# in training, no better a direction than the gradient of a small random **minibatch**. Each step:
# draw `batch_size` random positions, compute the loss and gradients on them, and move every
# parameter a little *against* its gradient,
#
# $$\theta \leftarrow \theta - \eta\, \nabla_\theta L_{\text{batch}},$$
#
# with learning rate $\eta$ (`lr`). Record the loss of every step: its curve tells you whether
# training works. The grader first checks single steps: on a stream where every minibatch is the
# same, one and two steps of your `train_ffnn` must give the `start` it passes (or `init_params(seed)`
# when it passes none) moved by `-lr *` the gradients of your own `ffnn_loss_and_grads`, exactly.
# It checks that your minibatches come from the whole stream, not from one part of it. Then it
# calls your `train_ffnn` on the training plays with its own settings, seed and start, and scores
# the returned parameters by their perplexity on the held-out test plays (with its own forward
# pass). Full points for doing about as well as the staff's code with the same settings; it takes
# about 10 seconds on one CPU core.
#
# **Only training the grader sees earns points.** The grader draws the starting parameters itself,
# from a secret seed for your submission, and passes them as `start`; the parameters `train_ffnn`
# returns must descend from that start through your own steps, so parameters trained anywhere else
# (at home, with another library, pasted into the notebook or loaded from a file) earn nothing.

# %% tags=["graded"]
import numpy as np


def context_windows(ids: np.ndarray, context: int):
    """Every position of a stream of ids with the `context` ids before it.

    ids: (N,) ints. Returns (contexts, targets): contexts (N, context) with
    contexts[t] = the `context` ids before position t, oldest first, where
    positions before the start count as id 0; targets (N,) = ids.

    Example:
        context_windows(np.array([5, 6, 7]), 2)
        -> (array([[0, 0], [0, 5], [5, 6]]), array([5, 6, 7]))
    """
    # BEGIN SOLUTION: context_windows: prepend `context` zeros, then stack `context` shifted slices as columns
    ids = np.asarray(ids)
    padded = np.concatenate([np.zeros(context, dtype=ids.dtype), ids])
    contexts = np.stack([padded[i:i + len(ids)] for i in range(context)], axis=1)
    return contexts, ids.copy()
    # END SOLUTION


def train_ffnn(ids: np.ndarray, vocab_size: int, *, context: int = 2, dim: int = 32, hidden: int = 64,
               lr: float = 2.0, batch_size: int = 128, steps: int = 2000, seed: int = 0,
               start: dict | None = None):
    """Train the feedforward LM on a stream of ids with minibatch SGD.

    Start from a copy of `start`, a parameter dict like init_params returns
    (the grader always passes one), or, when it is None, from
    init_params(vocab_size, dim, hidden, context, seed); make the
    windows with context_windows; then for each of `steps` steps draw
    batch_size random positions (with np.random.default_rng(seed + 1)), call
    ffnn_loss_and_grads on them, record the loss, and update every parameter:
    p -= lr * grad. Returns (params, losses): the trained parameter dict and
    the list of the `steps` minibatch losses (floats, each computed before its
    step's update), in order. The same arguments give the same result; `ids`
    and `start` are not modified. steps may be 0: a copy of the start and no
    losses. batch_size is at most len(ids), so a step's positions may be drawn
    with or without replacement (rng.integers or rng.choice).
    """
    # BEGIN SOLUTION: train_ffnn: a copy of the start, windows, one rng; loop: integers for the batch, loss and grads, an in-place SGD update, record the loss
    if start is None:
        start = init_params(vocab_size, dim, hidden, context, seed)
    params = {name: np.array(value, dtype=np.float64) for name, value in start.items()}  # a copy: start is not modified
    contexts, targets = context_windows(ids, context)
    rng = np.random.default_rng(seed + 1)
    losses = []
    for _ in range(steps):
        batch = rng.integers(0, len(targets), size=batch_size)
        loss, grads = ffnn_loss_and_grads(params, contexts[batch], targets[batch])
        for name in params:
            params[name] -= lr * grads[name]
        losses.append(float(loss))
    return params, losses
    # END SOLUTION


# %% [markdown]
# ## Experiments: Shakespeare
#
# The cells below are not graded. They encode the training and validation plays with the capped
# vocabulary (the same encoding the grader uses for the test plays), train your model, and plot
# the loss curve.

# %%
import time

from autograder.data import shakespeare
from autograder.sandbox.support import word_ids, word_vocab

train_lines, valid_lines = shakespeare.lines("train"), shakespeare.lines("validation")
vocab = word_vocab(train_lines, 2000)
train_ids, valid_ids = word_ids(train_lines, vocab), word_ids(valid_lines, vocab)
print(f"V = {len(vocab)}; {len(train_ids)} training and {len(valid_ids)} validation positions")
print(f"<unk> is {np.mean(valid_ids == 1):.1%} of validation; first words: {[vocab[i] for i in train_ids[:12]]}")

# %%
start = time.process_time()
params, losses = train_ffnn(train_ids, len(vocab), context=2, dim=32, hidden=64, lr=2.0,
                            batch_size=128, steps=2000, seed=0)
print(f"trained 2000 steps in {time.process_time() - start:.1f} s of CPU time")


def perplexity(params, ids, context=2, chunk=4000):
    """exp of the mean cross-entropy over every position of a stream, in chunks to save memory."""
    contexts, targets = context_windows(ids, context)
    total = sum(cross_entropy(ffnn_forward(params, contexts[i:i + chunk]), targets[i:i + chunk]) * len(targets[i:i + chunk])
                for i in range(0, len(targets), chunk))
    return float(np.exp(total / len(targets)))


ffnn_valid = perplexity(params, valid_ids)
print(f"feedforward LM: validation perplexity {ffnn_valid:.1f}")

# %% tags=["figure"]
import matplotlib.pyplot as plt

window = 50
smoothed = np.convolve(losses, np.ones(window) / window, mode="valid")
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(losses, color="tab:blue", alpha=0.3, label="minibatch loss")
ax.plot(np.arange(window - 1, len(losses)), smoothed, color="tab:blue", label=f"mean of {window} steps")
ax.axhline(np.log(len(vocab)), color="gray", linestyle="--", label="log V (uniform guess)")
ax.axhline(np.log(ffnn_valid), color="tab:orange", linestyle=":", label="validation (end)")
ax.set_xlabel("SGD step")
ax.set_ylabel("cross-entropy (nats)")
ax.set_title("Feedforward LM on Shakespeare")
ax.legend(loc="center right")
fig.tight_layout()
plt.show()

# %% [markdown]
# **Against the n-gram models of Homework 1.** Homework 1 kept every word seen twice (about 14,000
# words), so its perplexities are not comparable with ours: a bigger vocabulary spreads the
# probability over more words and has fewer `<unk>`s to guess. To compare fairly, the cell below
# builds unigram, bigram and trigram models on the same capped stream (maximum-likelihood counts,
# interpolated with a little add-one unigram so that nothing gets probability 0) and scores them on
# the same validation positions.

# %%
def count_probs(train_ids, valid_ids, V, n):
    """MLE P(word | previous n-1 ids), n >= 2, at every validation position (0 for unseen contexts)."""
    def codes(ids):  # one integer per context and per (context, word); contexts as in context_windows
        contexts, targets = context_windows(ids, n - 1)
        context_code = np.zeros(len(ids), dtype=np.int64)
        for j in range(n - 1):
            context_code = context_code * V + contexts[:, j]
        return context_code, context_code * V + targets

    def lookup(keys, table):  # how often each key occurs in table
        values, counts = np.unique(table, return_counts=True)
        at = np.minimum(np.searchsorted(values, keys), len(values) - 1)
        return np.where(values[at] == keys, counts[at], 0)

    train_context, train_gram = codes(train_ids)
    valid_context, valid_gram = codes(valid_ids)
    return lookup(valid_gram, train_gram) / np.maximum(lookup(valid_context, train_context), 1)


def ngram_perplexity(train_ids, valid_ids, V, lambdas):
    """Perplexity of add-one unigram, MLE bigram and MLE trigram mixed with weights `lambdas`."""
    unigram = (np.bincount(train_ids, minlength=V)[valid_ids] + 1) / (len(train_ids) + V)
    probs = [unigram, count_probs(train_ids, valid_ids, V, 2), count_probs(train_ids, valid_ids, V, 3)]
    return float(np.exp(-np.mean(np.log(sum(l * p for l, p in zip(lambdas, probs))))))


V = len(vocab)
results = {
    "unigram (add-one)": ngram_perplexity(train_ids, valid_ids, V, [1.0, 0.0, 0.0]),
    "bigram, interpolated": ngram_perplexity(train_ids, valid_ids, V, [0.3, 0.7, 0.0]),
    "trigram, interpolated": min(ngram_perplexity(train_ids, valid_ids, V, l)
                                 for l in ([0.2, 0.5, 0.3], [0.1, 0.5, 0.4], [0.3, 0.4, 0.3])),
    "feedforward LM (2000 steps)": ffnn_valid,
}
for name, ppl in results.items():
    print(f"{name:28s} {ppl:7.1f}")

# %% [markdown]
# What to take from this. Our run gave these validation perplexities (yours will be close):
# unigram 162, bigram 76, interpolated trigram 69, and the feedforward model 83 after its 2,000
# steps (about ten seconds). So after ten seconds of SGD the neural model is far better than the
# unigram but still behind the n-gram models, whose counts are exact after one pass over the data
# (and whose interpolation weights we even tuned on the validation plays). The neural model has
# seen 256,000 positions, less than a third of the training stream, and its loss curve is still
# going down. Trained longer and larger (`dim=64, hidden=128, lr=1.0, steps=20000`: about three
# minutes) it reaches about 67 and passes the trigram. It can, because it shares what it learns:
# words that occur in similar contexts get similar embeddings, so every update to "king" also
# helps "queen", while an n-gram table learns each context on its own. And it can grow its context
# (`context=3` or more) for the cost of a wider `W`, where a longer n-gram mostly meets contexts it
# has never seen.

# %% [markdown] tags=["written"]
# ### Written question 2: reading the loss curve
#
# In your loss curve, where does the loss start and why there (compare it with the dashed line),
# why is the minibatch loss so noisy while its running mean is smooth, and what does the gap
# between the end of the curve and the validation line tell you? Would you train longer, and what
# would you watch while doing so?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* It starts at about $\log V$: with small random weights the softmax is nearly
# uniform, and the cross-entropy of a uniform guess over $V$ words is $\log V$. Each minibatch holds
# only 128 positions, so its mean loss varies a lot from batch to batch (the noise shrinks like
# $1/\sqrt{128}$ but stays visible); the running mean averages 50 batches. The end of the training
# curve and the validation line are close, so the model is not overfitting yet: it is still
# underfitting, and the curve is still going down. Training longer should help; watch the
# validation perplexity (or loss) every few hundred steps and stop when it stops improving or
# starts to rise while the training loss keeps falling.

# %% [markdown]
# ## Done?
#
# Save the notebook, run the public checks one last time, then make the PDF of your written
# answers with `lmgrade export backprop.ipynb` and upload it to the written assignment. Submit
# `backprop.ipynb`.

# %%
from autograder import check_notebook
check_notebook(assignment="backprop")
