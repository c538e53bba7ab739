# %% [markdown]
# # Homework 4: attention from scratch
#
# Attention lets every position of a sequence look at every other position and take a weighted
# average of what it finds, with weights that depend on the content. It is the core of the
# Transformer (next homework). Here you build every piece yourself in PyTorch:
#
# | part | what you write | idea from the lecture |
# | --- | --- | --- |
# | Q1 | `dot_product_attention`, `bilinear_attention` | one decoder state attends over encoder states |
# | Q2 | `scaled_dot_product_attention` | softmax(QKᵀ/√d_k)V with a boolean mask |
# | Q3 | `causal_mask`, `padding_mask` | who may attend to whom |
# | Q4 | `split_heads`, `merge_heads`, `MultiHeadAttention` | multi-head self- and cross-attention |
# | Q5 | `GroupedQueryAttention` | grouped-query and multi-query attention |
# | Q6 | `sinusoidal_positions`, `LearnedPositions`, `apply_rope`, `alibi_slopes`, `alibi_bias` | positional information |
# | Q7 | (no new code) | your modules run on any device and dtype |
#
# **Rules.** Write attention yourself: `F.scaled_dot_product_attention`, `nn.MultiheadAttention`,
# `nn.Transformer*`, `flex_attention`, the `torch.ops.aten` attention kernels and other built-in
# attention are not allowed in graded cells (the grader reads your graded cells and withholds the
# points of every check of a function that reaches one, directly or through your helpers). **Getting
# round the ban** (another spelling, an alias, a star import, `getattr`/`vars`/`__dict__` or a name
# put together from strings) **is treated as not attempting the question.** Everything else in
# `torch` is fine: `torch.softmax`, `torch.einsum`, `nn.Linear`, `masked_fill`, ...
#
# **Graded code is plain Python the grader can read.** Graded cells may import only `torch` (and its
# public submodules), `numpy`, `math`, `random`, `collections`, `itertools`, `functools`, `operator`,
# `enum`, `typing`, `dataclasses`, `warnings`, `copy`, `bisect`, `heapq`, `time`, `tqdm`, `abc`,
# `statistics` and `contextlib`. Ordinary Python is welcome (classes, dataclasses, enums,
# `functools.partial`, `operator.mul`, `getattr`/`hasattr` with a literal name, `setattr(self, name,
# ...)` in a method looping over literal names, `type(self).__name__`). Not allowed: other reflection
# (`vars`, `globals`, `__dict__` and double-underscore names beyond `__init__`, `__repr__`,
# `__name__` and the like), code made or loaded at run time (`eval`, `exec`, `pickle`, `torch.load`,
# `torch.jit`, `torch.compile`, ...), private names of a library (`torch._C`, `torch._VF`), and
# changing a library (`torch.softmax = ...`). Use a module only as `module.name`: `import
# torch.nn.functional as F`, not `F = torch.nn.functional`. The grader reads your graded cells before
# it runs anything: a check whose code breaks these rules is not graded, and a statement that breaks
# them while the cells load is not run and costs only the checks of the names it touches; getting
# round them counts as not attempting the question.
#
# **Conventions used everywhere below.**
# - Shapes are written `(B, T, d)`: batch, time (sequence positions), features.
# - A **mask** is a boolean tensor where `True` means **"may attend"** (as in
#   `torch.nn.functional.scaled_dot_product_attention`). It broadcasts against the scores
#   `(..., T_q, T_k)`.
# - **Device and dtype.** Your code must run unchanged on a GPU and in float64. Never create a
#   tensor with a fixed device or dtype: use `device=x.device, dtype=x.dtype` or `torch.zeros_like(x)`.
#   Q7 checks this (in float64, and by running your code on a simulated accelerator that holds real
#   values, as a GPU would).
#
# **How grading works.** Only cells marked as *graded* are graded, by name: keep the names and
# signatures. Graded cells must work on their own: imports inside, no training or printing. Put
# experiments in ungraded cells. Save the notebook, then run the public checks:

# %%
from autograder import check_notebook
check_notebook(assignment="attention")  # finds this notebook; add question=2 to check one question

# %% [markdown]
# ## Q1. Attention of one decoder state over encoder states
#
# In an encoder–decoder RNN, the decoder state $h^{dec}_i$ attends over the encoder states
# $h_1, \dots, h_S$:
#
# $$e_{ij} = \mathrm{score}(h^{dec}_i, h_j), \qquad \alpha_{ij} = \frac{\exp e_{ij}}{\sum_{j'} \exp e_{ij'}}, \qquad c_i = \sum_j \alpha_{ij} h_j .$$
#
# With the **dot-product** score $e_{ij} = h^{dec}_i \cdot h_j$ the two states must have the same
# size; the **bilinear** score $e_{ij} = h^{dec\,\top}_i W h_j$ learns a matrix $W$ of shape
# `(d_dec, d_enc)` and allows different sizes. Both functions work on a batch and return
# `(context, weights)`.

# %% tags=["graded"]
import torch


def dot_product_attention(h_dec, H_enc):
    """Dot-product attention of one decoder state per example over its encoder states.

    h_dec: (B, d), H_enc: (B, S, d)  ->  context (B, d), weights (B, S)
    """
    # BEGIN SOLUTION: dot_product_attention: scores = H_enc @ h_dec, softmax over S, weighted sum of H_enc
    scores = torch.einsum("bsd,bd->bs", H_enc, h_dec)  # (B, S)
    weights = torch.softmax(scores, dim=-1)  # (B, S)
    context = torch.einsum("bs,bsd->bd", weights, H_enc)  # (B, d)
    return context, weights
    # END SOLUTION


def bilinear_attention(h_dec, H_enc, W):
    """Bilinear attention: score = h_dec^T W h_enc.

    h_dec: (B, d_dec), H_enc: (B, S, d_enc), W: (d_dec, d_enc)  ->  context (B, d_enc), weights (B, S)
    """
    # BEGIN SOLUTION: bilinear_attention: project h_dec with W, then proceed as in dot_product_attention
    query = h_dec @ W  # (B, d_enc)
    scores = torch.einsum("bsd,bd->bs", H_enc, query)  # (B, S)
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bs,bsd->bd", weights, H_enc), weights
    # END SOLUTION


# %% [markdown]
# ## Q2. Scaled dot-product attention
#
# With queries $Q$ `(..., T_q, d_k)`, keys $K$ `(..., T_k, d_k)` and values $V$ `(..., T_k, d_v)`:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V .$$
#
# Why $\sqrt{d_k}$: if the entries of $q$ and $k$ are independent with variance 1, then $q \cdot k$
# has variance $d_k$; dividing by $\sqrt{d_k}$ keeps the scores at unit scale, so the softmax does
# not saturate as $d_k$ grows.
#
# **Masks.** Where `mask` is `False` the query may not attend to that key: set the score to $-\infty$
# (or the most negative number of the dtype) **before** the softmax, so that its weight is exactly
# 0 and the other weights still sum to 1. A row in which every key is masked (a query that may
# attend to nothing) must give all-zero weights and a zero output, never NaN.
#
# **Stability.** Scores can be large (try multiplying $Q$ by 1000): use `torch.softmax`, or
# subtract the row maximum before `exp`.

# %% tags=["graded"]
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    """softmax(q k^T / sqrt(d_k)) v with an optional boolean mask (True = may attend).

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v), mask: broadcastable to (..., T_q, T_k)
    -> output (..., T_q, d_v), weights (..., T_q, T_k). Fully masked rows give zero weights and outputs.
    """
    # BEGIN SOLUTION: scaled_dot_product_attention: scores, mask (before the softmax), softmax over keys, zero fully-masked rows
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:  # a row with nothing to attend to: uniform after the fill, so zero it
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    return weights @ v, weights
    # END SOLUTION


# %% [markdown]
# ## Q3. Masks
#
# **Causal mask.** In a language model, position $i$ may only look at positions $\le i$. With a
# KV cache, the queries are only the last `T_q` of the `T_k` positions (for example one new token
# attending to everything so far), so the mask is aligned to the **lower right**: query row $i$
# stands for absolute position $i + (T_k - T_q)$ and may attend to keys $j \le i + T_k - T_q$.
#
# **Padding mask.** A batch of sequences of different lengths is padded to a common length `T`;
# `padding_mask(lengths, T)` is `True` at real tokens (position < length) and `False` at padding,
# shape `(B, T)`. To mask padded *keys*, reshape it to `(B, 1, T)` so it broadcasts over queries.

# %% tags=["graded"]
import torch


def causal_mask(T_q, T_k=None, device=None):
    """Boolean (T_q, T_k) mask, True where query i may attend key j, aligned lower-right."""
    # BEGIN SOLUTION: causal_mask: compare key index j with query index i + (T_k - T_q)
    T_k = T_q if T_k is None else T_k
    i = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)
    j = torch.arange(T_k, device=device)[None, :]  # (1, T_k)
    return j <= i + (T_k - T_q)
    # END SOLUTION


def padding_mask(lengths, T):
    """lengths: (B,) integer tensor -> (B, T) boolean, True at positions < length."""
    # BEGIN SOLUTION: padding_mask: compare arange(T) with lengths[:, None]
    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]
    # END SOLUTION


# %%
print(causal_mask(3, 5).int())

# %% [markdown]
# ## Q4. Multi-head attention
#
# One attention head can only form one weighted average per position. **Multi-head attention**
# projects the input to $h$ smaller queries, keys and values (each of size $d_{head} = d_{model}/h$),
# attends in each head independently, concatenates the heads and mixes them with an output
# projection $W_O$:
#
# $$\mathrm{MHA}(X) = \mathrm{Concat}(\mathrm{head}_1, \dots, \mathrm{head}_h) W_O, \qquad \mathrm{head}_i = \mathrm{Attention}(X W^Q_i, X W^K_i, X W^V_i).$$
#
# In code, one `nn.Linear(d_model, d_model)` computes all heads' queries at once; `split_heads`
# turns `(B, T, d_model)` into `(B, h, T, d_head)` (the features of head `i` are columns
# `i*d_head ... (i+1)*d_head - 1`), and `merge_heads` undoes it. A reshape that goes straight from
# `(B, T, d_model)` to `(B, h, T, d_head)` mixes positions and heads: reshape to
# `(B, T, h, d_head)` first, then transpose.
#
# **Cross-attention**: queries come from the decoder `x` `(B, T_q, d_model)`, keys and values from
# the encoder output `context` `(B, T_k, d_model)`. `context=None` means self-attention.
# The projections are given (the grader loads weights into them by these names); write
# `forward`. `mask` broadcasts to `(B, h, T_q, T_k)`: a `(T_q, T_k)` causal mask, or a
# `(B, 1, 1, T_k)` padding mask.

# %% tags=["graded"]
import torch
from torch import nn


def split_heads(x, n_heads):
    """(B, T, d_model) -> (B, n_heads, T, d_model // n_heads)."""
    # BEGIN SOLUTION: split_heads: view as (B, T, h, d_head), then swap T and h
    B, T, d_model = x.shape
    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)
    # END SOLUTION


def merge_heads(x):
    """(B, n_heads, T, d_head) -> (B, T, n_heads * d_head): the inverse of split_heads."""
    # BEGIN SOLUTION: merge_heads: swap back, then flatten the last two dimensions
    B, h, T, d_head = x.shape
    return x.transpose(1, 2).reshape(B, T, h * d_head)
    # END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head (self- or cross-) attention, written with your scaled_dot_product_attention."""

    def __init__(self, d_model, n_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.d_model, self.n_heads = d_model, n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, context=None, mask=None):
        """x: (B, T_q, d_model), context: (B, T_k, d_model) or None -> (B, T_q, d_model)."""
        # BEGIN SOLUTION: MultiHeadAttention.forward: project, split_heads, scaled_dot_product_attention, merge_heads, out_proj
        context = x if context is None else context
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T_q, d_head)
        k = split_heads(self.k_proj(context), self.n_heads)  # (B, h, T_k, d_head)
        v = split_heads(self.v_proj(context), self.n_heads)  # (B, h, T_k, d_head)
        out, _ = scaled_dot_product_attention(q, k, v, mask)  # (B, h, T_q, d_head)
        return self.out_proj(merge_heads(out))  # (B, T_q, d_model)
        # END SOLUTION


# %% [markdown]
# ## Q5. Grouped-query attention
#
# At generation time the keys and values of every past token are cached, and that cache, not the
# arithmetic, limits speed and batch size. **Grouped-query attention** (GQA) keeps `n_heads` query
# heads but only `n_kv_heads` key/value heads; each key/value head is shared by a group of
# `n_heads // n_kv_heads` consecutive query heads (query head `i` uses key/value head
# `i // (n_heads // n_kv_heads)`). `n_kv_heads = 1` is **multi-query attention**;
# `n_kv_heads = n_heads` is ordinary multi-head attention. Hint: `repeat_interleave`.

# %% tags=["graded"]
import torch
from torch import nn


class GroupedQueryAttention(nn.Module):
    """Self-attention with n_heads query heads sharing n_kv_heads key/value heads."""

    def __init__(self, d_model, n_heads, n_kv_heads, bias=True):
        super().__init__()
        assert d_model % n_heads == 0 and n_heads % n_kv_heads == 0
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.v_proj = nn.Linear(d_model, n_kv_heads * self.d_head, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        """x: (B, T, d_model) -> (B, T, d_model)."""
        # BEGIN SOLUTION: GroupedQueryAttention.forward: split keys/values into n_kv_heads, repeat each for its group of query heads
        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T, d_head)
        k = split_heads(self.k_proj(x), self.n_kv_heads)  # (B, h_kv, T, d_head)
        v = split_heads(self.v_proj(x), self.n_kv_heads)
        group = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)
        v = v.repeat_interleave(group, dim=1)
        out, _ = scaled_dot_product_attention(q, k, v, mask)
        return self.out_proj(merge_heads(out))
        # END SOLUTION


# %% [markdown]
# ## Q6. Positions
#
# Attention by itself treats its input as a **set**: permute the positions and the outputs are
# permuted the same way (try it below). Word order has to be put in.
#
# - **Sinusoidal** (Vaswani et al., 2017): a fixed `(T, d)` table added to the embeddings, with
#   $PE_{pos, 2k} = \sin(pos\,\omega_k)$, $PE_{pos, 2k+1} = \cos(pos\,\omega_k)$,
#   $\omega_k = 1/10000^{2k/d}$ (sin on even, cos on odd dimensions).
# - **Learned absolute**: a trainable table of `max_len` vectors, one per position, added to the input.
# - **RoPE** (Su et al., 2021): rotate each pair of features $(x_{2k}, x_{2k+1})$ of a query or key
#   at position $m$ by the angle $m\,\theta_k$, $\theta_k = \mathrm{base}^{-2k/d}$:
#   $(x_{2k}\cos m\theta_k - x_{2k+1}\sin m\theta_k,\; x_{2k}\sin m\theta_k + x_{2k+1}\cos m\theta_k)$.
#   Rotations keep norms, and $q_m \cdot k_n$ depends only on $m - n$.
# - **ALiBi** (Press et al., 2022): no embedding at all; a bias $m_h (j - i)$ is added to the score of
#   query $i$ and key $j$, with a slope $m_h$ per head. For $n$ heads, $n$ a power of two, the
#   slopes are the geometric sequence $2^{-8/n}, 2^{-16/n}, \dots, 2^{-8}$. Otherwise take the
#   slopes for the largest power of two $p < n$, followed by every other slope of the sequence for
#   $2p$ heads (`[0::2]`) until there are $n$. `alibi_bias` uses the same lower-right alignment as
#   `causal_mask` (query row $i$ is position $i + T_k - T_q$); entries above the diagonal are
#   positive and are meant to be masked.

# %% tags=["graded"]
import math

import torch
from torch import nn


def sinusoidal_positions(T, d, device=None, dtype=torch.float32):
    """(T, d) table: sin(pos * w_k) in column 2k, cos(pos * w_k) in column 2k+1, w_k = 1/10000^(2k/d)."""
    # BEGIN SOLUTION: sinusoidal_positions: outer product of positions and frequencies, then sin into even and cos into odd columns
    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None]  # (T, 1)
    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)
    table = torch.zeros(T, d, device=device, dtype=torch.float64)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq[: d // 2])
    return table.to(dtype)
    # END SOLUTION


class LearnedPositions(nn.Module):
    """Adds a learned vector per position to the input."""

    def __init__(self, max_len, d_model):
        super().__init__()
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, x):
        """x: (B, T, d_model) with T <= max_len -> x plus the vectors of positions 0..T-1."""
        # BEGIN SOLUTION: LearnedPositions.forward: look up positions 0..T-1 (on x's device) and add
        positions = torch.arange(x.size(1), device=x.device)  # (T,)
        return x + self.table(positions)  # (B, T, d) + (T, d)
        # END SOLUTION


def apply_rope(x, positions=None, base=10000.0):
    """Rotate feature pairs (2k, 2k+1) of x: (..., T, d) by angle position * base^(-2k/d).

    positions: (T,) integer tensor, default 0..T-1.
    """
    # BEGIN SOLUTION: apply_rope: angles (T, d/2); rotate x[..., 0::2] and x[..., 1::2] together
    T, d = x.shape[-2], x.shape[-1]
    if positions is None:
        positions = torch.arange(T, device=x.device)
    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # (d/2,)
    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)
    return out.flatten(-2)
    # END SOLUTION


def alibi_slopes(n_heads):
    """The ALiBi slope of each head, a (n_heads,) float tensor."""
    # BEGIN SOLUTION: alibi_slopes: geometric sequence for a power of two; otherwise extend with every other slope of twice as many heads
    def geometric(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    p = 2 ** math.floor(math.log2(n_heads))
    slopes = geometric(p)
    if p < n_heads:
        slopes += geometric(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes)
    # END SOLUTION


def alibi_bias(n_heads, T_q, T_k=None, device=None):
    """(n_heads, T_q, T_k) bias slope_h * (j - i), query row i standing for position i + T_k - T_q."""
    # BEGIN SOLUTION: alibi_bias: slopes times the (T_q, T_k) matrix of offsets j - (i + T_k - T_q)
    T_k = T_q if T_k is None else T_k
    i = torch.arange(T_q, device=device)[:, None] + (T_k - T_q)
    j = torch.arange(T_k, device=device)[None, :]
    return alibi_slopes(n_heads).to(device)[:, None, None] * (j - i)  # (h, T_q, T_k)
    # END SOLUTION


# %% [markdown]
# ## Q7. Device- and dtype-agnostic code
#
# No new code: the grader runs your modules and functions in float64 and checks the results against
# a float64 truth at float64 accuracy (a computation done in float32 and cast back loses about 9
# digits and fails), and checks that `device=` and `dtype=` arguments are followed
# (`sinusoidal_positions(T, d, dtype=torch.float64)`, `causal_mask(T, device=...)`). It also runs
# every function and module on a simulated accelerator: inputs and parameters live on a non-CPU
# device and hold real values, so `.item()` and `.tolist()` work as on a GPU, while a tensor your code
# creates on a fixed device (`torch.zeros(T, T)` inside `forward`, `torch.arange(T)` without
# `device=`) meets the device's tensors and fails as it would on a GPU ("Expected all tensors to be
# on the same device"). The results must also equal the same call's on the CPU. If you have a GPU,
# `MultiHeadAttention(16, 4).to("cuda")(torch.randn(2, 5, 16, device="cuda"))` is the same test.

# %% [markdown]
# ## Experiments (not graded)
#
# **An attention heat map.** A random (untrained) 2-head attention with a causal mask: each row is a
# query position and shows how its weight is spread over the positions it may see.

# %% tags=["figure"]
import matplotlib.pyplot as plt

torch.manual_seed(0)
T, d_model, n_heads = 8, 16, 2
x = torch.randn(1, T, d_model)
mha = MultiHeadAttention(d_model, n_heads)
q = split_heads(mha.q_proj(x), n_heads)
k = split_heads(mha.k_proj(x), n_heads)
v = split_heads(mha.v_proj(x), n_heads)
_, weights = scaled_dot_product_attention(q * 3, k, v, causal_mask(T))  # sharper for the picture
fig, axes = plt.subplots(1, n_heads, figsize=(8, 4))
for head, ax in enumerate(axes):
    ax.imshow(weights[0, head].detach(), cmap="viridis")
    ax.set(title=f"head {head}", xlabel="key position", ylabel="query position")
fig.tight_layout()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 1: what the causal mask does to an attention map
#
# Describe the shape of your two heat maps. Why is everything above the diagonal exactly 0, what
# does row 0 look like and why, and how does the weight a query can give one key change as the
# query position grows? What would the maps look like without the mask?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* The maps are lower triangular: query $i$ may attend only to keys $j \le i$, and the
# masked scores are set to $-\infty$ before the softmax, so their weights are exactly 0. Row 0 has a
# single allowed key, itself, so its weight is 1 (the brightest cell). Each row sums to 1 over
# $i + 1$ keys, so later queries spread their weight over more positions and individual weights
# tend to shrink (about $1/(i+1)$ when the scores are similar), unless one key's score stands out.
# Without the mask every row would spread over all 8 positions, including the future ones, and the
# upper triangle would be filled.

# %% [markdown]
# **Self-attention without positions is permutation-equivariant.** Shuffle the positions of the
# input: the output rows are shuffled the same way, and nothing else changes. Add sinusoidal
# positions first and this is no longer true.

# %% tags=["figure"]
perm = torch.randperm(T)
with torch.no_grad():
    plain = mha(x)
    shuffled = mha(x[:, perm])
    print("without positions, permuted output == output of permuted input:",
          torch.allclose(shuffled, plain[:, perm], atol=1e-6))
    pe = sinusoidal_positions(T, d_model)
    with_pos = mha(x + pe)
    shuffled_pos = mha(x[:, perm] + pe)
    print("with sinusoidal positions:", torch.allclose(shuffled_pos, with_pos[:, perm], atol=1e-6))

# %% [markdown] tags=["written"]
# ### Written question 2: what positions change
#
# The cell above printed whether permuting the input just permutes the output, without and with
# sinusoidal positions. Explain both results from the formula of attention. For a sentence, what
# could a model without positions not tell apart, and why does a causal mask alone already give a
# decoder some sense of order?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* Without positions each output row is a weighted mean of the values, with weights
# from the scores $q_i \cdot k_j$, which depend only on the tokens, not on where they stand;
# permuting the input permutes the queries, keys and values alike, so the output rows are permuted
# the same way (True). Adding a position vector makes each input depend on its slot, so the
# permuted input is a different set of vectors and the output changes (False). Without positions,
# "dog bites man" and "man bites dog" give the same set of outputs. A causal mask breaks the
# symmetry: position $i$ sees exactly $i + 1$ tokens, so the model can infer how far in it is (the
# number of visible tokens) even without position vectors.

# %% [markdown]
# **RoPE sees only offsets.** The score of a rotated query at position m and a rotated key at
# position n depends only on m - n:

# %%
qv, kv = torch.randn(1, 16), torch.randn(1, 16)
for m, n in [(3, 1), (10, 8), (50, 48)]:
    score = apply_rope(qv, torch.tensor([m])) @ apply_rope(kv, torch.tensor([n])).T
    print(f"m={m:2d} n={n:2d} m-n={m - n}: score {score.item():+.6f}")

# %% [markdown]
# ## Done?
#
# Save the notebook, run the public checks one last time, then make the PDF of your written
# answers with `lmgrade export attention.ipynb` and upload it to the written assignment. Submit
# `attention.ipynb`.

# %%
from autograder import check_notebook
check_notebook(assignment="attention")
