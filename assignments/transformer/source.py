# %% [markdown]
# # Homework 5: a Transformer language model from scratch
#
# You build a GPT-style language model piece by piece, train it on Shakespeare with your own
# optimizer, generate from it with a KV cache, and finish with an encoder–decoder Transformer.
#
# | part | what you write | idea from the lecture |
# | --- | --- | --- |
# | Q1 | `LayerNorm`, `RMSNorm` | normalizing each position's features |
# | Q2 | `MLP` (GELU), `SwiGLU` | the position-wise feed-forward layer |
# | Q3 | `apply_rope`, `MultiHeadAttention`, `Block` | causal self-attention, residuals, pre-norm vs post-norm |
# | Q4 | `TransformerLM`, `param_count` | the decoder-only LM, weight tying, counting parameters |
# | Q5 | `adamw_step`, `AdamW`, `lr_at`, `clip_grads`, `get_batch` | the training pieces |
# | Q6 | `train_lm` | training loop; a character-level Shakespeare model |
# | Q7 | the cache in `forward`, `filter_logits`, `generate` | decoding with a KV cache, temperature, top-k, top-p |
# | Q8 | `DecoderBlock`, `Seq2Seq`, `greedy_decode`, `train_seq2seq` | encoder–decoder with cross-attention |
#
# **Rules.** Write every piece yourself. Built-in attention (`F.scaled_dot_product_attention`,
# `nn.MultiheadAttention`, `nn.Transformer*`), every built-in normalization layer (`nn.LayerNorm`,
# `nn.RMSNorm`, `F.layer_norm`, `F.rms_norm`, and also `F.group_norm`, `F.instance_norm`,
# `F.batch_norm` and their modules, which compute a layer norm on a reshaped input),
# `torch.optim.Adam`/`AdamW`, `torch.optim.lr_scheduler` and `clip_grad_norm_` are not allowed in
# graded cells: the grader detects them (by any spelling and under any of torch's names)
# and withholds the points of every check that grades code reaching them. Getting round the ban is
# treated as not attempting the question. Everything else is fine: `nn.Linear`, `nn.Embedding`,
# `F.gelu`, `F.silu`, `F.cross_entropy`, `torch.softmax`, autograd.
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
# **Conventions.** Shapes `(B, T, d)`: batch, time, features. Masks are boolean, `True` = may attend.
# Causal masks with fewer queries than keys are aligned lower-right (query row `i` is position
# `i + T_k - T_q`). Never create a tensor on a fixed device or dtype (`device=x.device`,
# `dtype=x.dtype`, `torch.zeros_like`): the grader runs your modules in float64, and your functions,
# modules and training loops on a simulated accelerator that holds real values (as a GPU would:
# `.item()` works, a CPU tensor mixed into its computation fails), comparing with the CPU's results. **Never cast to float32 inside a module**: float64 in, float64 out,
# computed in float64 throughout. Some well-known references (LLaMA's RMSNorm among them) upcast to
# float32 and cast back, for half-precision training; here that is a bug, since the grader checks
# float64 modules to float64 precision. The grader also feeds inputs at the scales where naive
# formulas break (inputs far from 0, scores and logits of size 1000, very low temperatures):
# prefer `torch.softmax`, `torch.log_softmax` and `F.cross_entropy` to `exp` and `log` by hand.
# Module attribute names are given: the grader loads weights into your modules by these names.
#
# **How grading works.** Only cells marked *graded* are graded, by name. Graded cells must only
# define things (imports inside, no training or printing). Save the notebook, then run the public checks:

# %%
from autograder import check_notebook
check_notebook(assignment="transformer")  # finds this notebook; add question=2 to check one question

# %% [markdown]
# ## Q1. LayerNorm and RMSNorm
#
# **LayerNorm** normalizes each position's feature vector to mean 0 and variance 1, then applies a
# learned gain $\gamma$ and bias $\beta$:
# $$\mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta, \qquad
# \mu = \tfrac1d \sum_i x_i,\quad \sigma^2 = \tfrac1d \sum_i (x_i - \mu)^2 .$$
# The variance is the *biased* one (divide by $d$, as `nn.LayerNorm` does), over the **last**
# dimension only. `bias=False` means no $\beta$ (the attribute `bias` is then `None`).
#
# **RMSNorm** (Zhang & Sennrich, 2019; used by LLaMA) skips the centering and the bias:
# $\mathrm{RMS}(x) = \gamma \odot x / \sqrt{\tfrac1d \sum_i x_i^2 + \epsilon}$.
# Start with $\gamma = 1$ and $\beta = 0$.

# %% tags=["graded"]
import torch
from torch import nn


class LayerNorm(nn.Module):
    """Layer normalization over the last dimension, with gain `weight` (d,) and bias `bias` (d,) or None."""

    def __init__(self, d, eps=1e-5, bias=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))
        self.bias = nn.Parameter(torch.zeros(d)) if bias else None

    def forward(self, x):
        """x: (..., d) -> (..., d)."""
        # BEGIN SOLUTION: LayerNorm.forward: mean and biased variance over the last dim, normalize, scale, shift
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        out = (x - mean) / torch.sqrt(var + self.eps) * self.weight
        return out + self.bias if self.bias is not None else out
        # END SOLUTION


class RMSNorm(nn.Module):
    """RMS normalization over the last dimension with gain `weight` (d,)."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        """x: (..., d) -> (..., d)."""
        # BEGIN SOLUTION: RMSNorm.forward: divide by sqrt(mean(x^2) + eps), then scale
        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        # END SOLUTION


# %% [markdown]
# ## Q2. Feed-forward layers
#
# After attention mixes information across positions, a feed-forward layer transforms each
# position on its own. The classic one (GPT-2) is
# $\mathrm{MLP}(x) = W_2\,\mathrm{GELU}(W_1 x + b_1) + b_2$ with the exact (erf) GELU,
# $\mathrm{GELU}(z) = z\,\Phi(z)$ (`F.gelu` with its default). **SwiGLU** (Shazeer, 2020; LLaMA)
# gates one projection with another:
# $\mathrm{SwiGLU}(x) = W_{down}\big(\mathrm{SiLU}(W_{gate} x) \odot W_{up} x\big)$,
# $\mathrm{SiLU}(z) = z\,\sigma(z)$, and by default no biases.

# %% tags=["graded"]
import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    """fc: d_model -> d_ff, exact GELU, proj: d_ff -> d_model."""

    def __init__(self, d_model, d_ff, bias=True):
        super().__init__()
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        self.proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        """x: (..., d_model) -> (..., d_model)."""
        # BEGIN SOLUTION: MLP.forward: proj(gelu(fc(x)))
        return self.proj(F.gelu(self.fc(x)))
        # END SOLUTION


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)); gate, up: d_model -> d_ff, down: d_ff -> d_model."""

    def __init__(self, d_model, d_ff, bias=False):
        super().__init__()
        self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.up = nn.Linear(d_model, d_ff, bias=bias)
        self.down = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x):
        """x: (..., d_model) -> (..., d_model)."""
        # BEGIN SOLUTION: SwiGLU.forward: silu of the gate times up, then down
        return self.down(F.silu(self.gate(x)) * self.up(x))
        # END SOLUTION


# %% [markdown]
# ## Q3. Attention and the Transformer block
#
# Write multi-head attention again (as in the attention homework, or paste your own from there):
# project to queries, keys and values, split into `n_heads` heads of size `d_head = d_model / n_heads`
# (head `i` holds features `i*d_head .. (i+1)*d_head - 1`), attend with
# $\mathrm{softmax}(QK^\top/\sqrt{d_{head}})V$, merge the heads, apply `out_proj`.
#
# - `context=None` is self-attention; otherwise keys and values come from `context` (cross-attention).
# - `causal=True` lets query position $i$ attend to keys $j \le i$ (lower-right aligned).
# - `rope=True` rotates the queries and keys (not the values) of each head with **RoPE** before the
#   scores: pair $(x_{2k}, x_{2k+1})$ at position $m$ is rotated by angle $m\,\theta_k$,
#   $\theta_k = 10000^{-2k/d_{head}}$. Write `apply_rope(x, positions)` for `x` `(..., T, d)` and
#   integer `positions` `(T,)`.
# - `cache` is for Q7; ignore it until then (Q3's checks never pass one).
#
# The **block** (GPT-2 style, *pre-norm*): `x = x + attn(norm1(x))`, then `x = x + mlp(norm2(x))`,
# with your `LayerNorm` and GELU `MLP`. The residual path stays un-normalized, which is what makes
# deep pre-norm stacks train without warmup tricks. The original Transformer was *post-norm*:
# `x = norm1(x + attn(x))`, then `x = norm2(x + mlp(x))`; `post_norm=True` selects it.

# %% tags=["graded"]
import math

import torch
from torch import nn


def apply_rope(x, positions, base=10000.0):
    """Rotate feature pairs (2k, 2k+1) of x (..., T, d) by angle positions[t] * base^(-2k/d); positions: (T,) ints."""
    # BEGIN SOLUTION: apply_rope: angles (T, d/2); rotate even and odd features together
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # (d/2,)
    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)
    cos, sin = torch.cos(angle), torch.sin(angle)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
    # END SOLUTION


class MultiHeadAttention(nn.Module):
    """Multi-head self- or cross-attention, optionally causal, optionally with RoPE, optionally cached (Q7)."""

    def __init__(self, d_model, n_heads, bias=True, rope=False):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_head, self.rope = n_heads, d_model // n_heads, rope
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, context=None, causal=False, cache=None):
        """x: (B, T, d_model), context: (B, S, d_model) or None -> (B, T, d_model).

        Q7: with `cache` (self-attention only) return (output, (k, v)) where k, v are the keys and
        values of all positions so far, (B, n_heads, T_past + T, d_head), keys after RoPE. `cache` is
        () for "nothing cached yet" or the (k, v) returned by the previous call; the new tokens sit
        at positions T_past .. T_past + T - 1. Never modify the cache you are given.
        """
        # BEGIN SOLUTION: MultiHeadAttention.forward: project, split heads, (RoPE), (cache), masked softmax, merge, out_proj
        B, T, _ = x.shape
        source = x if context is None else context

        def heads(y):  # (B, S, d_model) -> (B, h, S, d_head)
            return y.view(B, -1, self.n_heads, self.d_head).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(source)), heads(self.v_proj(source))
        past = 0 if not cache else cache[0].shape[2]
        if self.rope:
            positions = torch.arange(past, past + T, device=x.device)
            q, k = apply_rope(q, positions), apply_rope(k, positions)
        if cache:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, T_past + T, d_head)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, T, T_k)
        if causal:
            T_k = k.shape[2]
            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)
            j = torch.arange(T_k, device=x.device)[None, :]
            scores = scores.masked_fill(j > i, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_head)
        out = self.out_proj(out.transpose(1, 2).reshape(B, T, -1))
        return out if cache is None else (out, (k, v))
        # END SOLUTION


class Block(nn.Module):
    """A Transformer block: self-attention and MLP, each with a residual connection; pre-norm by default."""

    def __init__(self, d_model, n_heads, d_ff, bias=True, post_norm=False, rope=False, causal=True):
        super().__init__()
        self.post_norm, self.causal = post_norm, causal
        self.norm1 = LayerNorm(d_model, bias=bias)
        self.attn = MultiHeadAttention(d_model, n_heads, bias=bias, rope=rope)
        self.norm2 = LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, d_ff, bias=bias)

    def forward(self, x, cache=None):
        """x: (B, T, d_model) -> (B, T, d_model); with a cache (Q7) -> (output, new layer cache)."""
        # BEGIN SOLUTION: Block.forward: pre-norm x + attn(norm1(x)), x + mlp(norm2(x)); post-norm normalizes after each sum
        if self.post_norm:
            a = self.attn(x, causal=self.causal, cache=cache)
            a, new = a if cache is not None else (a, None)
            x = self.norm1(x + a)
            x = self.norm2(x + self.mlp(x))
        else:
            a = self.attn(self.norm1(x), causal=self.causal, cache=cache)
            a, new = a if cache is not None else (a, None)
            x = x + a
            x = x + self.mlp(self.norm2(x))
        return x if cache is None else (x, new)
        # END SOLUTION


# %% [markdown]
# ## Q4. A decoder-only language model
#
# `TransformerLM` embeds tokens (`tok_emb`), adds learned positions (`pos_emb`, an
# `nn.Embedding(max_len, d_model)`) when `positions="learned"`, or uses RoPE inside every
# attention layer when `positions="rope"` (then there is no `pos_emb`). Then `n_layers` blocks
# (`blocks`, an `nn.ModuleList`), a final `LayerNorm` (`norm_f`), and a linear head without bias
# (`head`) to `vocab_size` logits. With `tie_weights=True` the head **is** the embedding matrix
# (`self.head.weight = self.tok_emb.weight`): one parameter, saved under both names.
#
# `param_count(...)` takes the same arguments as `TransformerLM` and returns its number of
# trainable parameters **by formula**, without building the model (a tied matrix counts once).
# Write it out: the grader checks it on configurations far too large to instantiate cheaply.

# %% tags=["graded"]
import torch
from torch import nn


def small_init(module):
    """GPT-2's initialization: N(0, 0.02) weights for linear layers and embeddings, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class TransformerLM(nn.Module):
    """GPT-style decoder-only LM. forward(idx (B, T) int64) -> logits (B, T, vocab_size)."""

    def __init__(self, vocab_size, d_model, n_layers, n_heads, d_ff, max_len, positions="learned",
                 tie_weights=True, bias=True, post_norm=False):
        super().__init__()
        assert positions in ("learned", "rope")
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model) if positions == "learned" else None
        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, bias=bias, post_norm=post_norm,
                                           rope=positions == "rope") for _ in range(n_layers)])
        self.norm_f = LayerNorm(d_model, bias=bias)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        if tie_weights:
            self.head.weight = self.tok_emb.weight
        self.apply(small_init)

    def forward(self, idx, cache=None):
        """idx: (B, T) -> logits (B, T, vocab_size).

        Q7: with `cache` given, return (logits, new_cache). The cache is a list with one (k, v)
        per layer, each (B, n_heads, T_past, d_head) (keys after RoPE); `[]` means nothing cached
        yet. The new tokens sit at positions T_past .. T_past + T - 1. Never modify the given cache.
        """
        # BEGIN SOLUTION: TransformerLM.forward: embed tokens (+ positions from T_past), blocks (passing each its cache), norm_f, head
        past = cache[0][0].shape[2] if cache else 0
        x = self.tok_emb(idx)  # (B, T, d)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(past, past + idx.shape[1], device=idx.device))
        new_cache = []
        for i, block in enumerate(self.blocks):
            if cache is None:
                x = block(x)
            else:
                x, layer = block(x, cache[i] if cache else ())
                new_cache.append(layer)
        logits = self.head(self.norm_f(x))  # (B, T, V)
        return logits if cache is None else (logits, new_cache)
        # END SOLUTION


def param_count(vocab_size, d_model, n_layers, n_heads, d_ff, max_len, positions="learned",
                tie_weights=True, bias=True, post_norm=False):
    """The number of trainable parameters of TransformerLM(...) with these arguments, by formula."""
    # BEGIN SOLUTION: param_count: embeddings, per block (attention, MLP, two norms), final norm, untied head
    norm = d_model * (2 if bias else 1)
    attention = 4 * d_model * d_model + (4 * d_model if bias else 0)
    mlp = 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)
    total = vocab_size * d_model + n_layers * (attention + mlp + 2 * norm) + norm
    total += max_len * d_model if positions == "learned" else 0
    total += 0 if tie_weights else vocab_size * d_model
    return total
    # END SOLUTION


# %% [markdown]
# ## Q5. Training pieces
#
# **AdamW** (Loshchilov & Hutter, 2019). For each parameter $\theta$ with gradient $g$, at step
# $t = 1, 2, \dots$:
# $$m \leftarrow \beta_1 m + (1-\beta_1) g,\quad v \leftarrow \beta_2 v + (1-\beta_2) g^2,\quad
# \hat m = \frac{m}{1-\beta_1^t},\quad \hat v = \frac{v}{1-\beta_2^t},$$
# $$\theta \leftarrow \theta - \eta\,\lambda\,\theta - \eta\,\frac{\hat m}{\sqrt{\hat v} + \epsilon}.$$
# The weight decay $\lambda$ is *decoupled*: it shrinks $\theta$ directly and never enters $g$ (adding
# $\lambda\theta$ to the gradient is L2 regularization, which Adam's scaling distorts). $\epsilon$ is
# added **after** the square root. `adamw_step` does one update of one tensor and returns new tensors
# (its inputs stay unchanged); `AdamW` applies it to every parameter (weight decay on all of them)
# and keeps `m`, `v` and `t` per parameter. `step(lr=None)` uses the given learning rate for this
# step when one is given (for schedules).
#
# **Schedule** `lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0)`, steps counted from 0:
# linear warmup `max_lr * (step + 1) / warmup_steps` for `step < warmup_steps` (so step 0 already
# trains, and step `warmup_steps - 1` reaches `max_lr`); then cosine decay
# `min_lr + (max_lr - min_lr) * (1 + cos(pi * progress)) / 2` with
# `progress = (step - warmup_steps) / (total_steps - warmup_steps)`, which is `max_lr` at
# `step = warmup_steps` and `min_lr` at `step = total_steps`; `min_lr` after that.
#
# **Global-norm clipping** `clip_grads(grads, max_norm) -> (clipped, total_norm)`: the norm of all
# gradients together, $\|g\| = \sqrt{\sum_i \|g_i\|^2}$; every gradient is multiplied by
# `min(1, max_norm / (total_norm + 1e-6))` (the same factor for all). Returns new tensors and the
# norm before clipping as a Python float.
#
# **Batches** `get_batch(data, batch_size, block_size, generator)`: `data` is a 1-D int64 tensor of
# token ids; draw `batch_size` start positions uniformly from `0 .. len(data) - block_size - 1` (every
# crop that has a next token) with `torch.randint(..., generator=generator)`, and return
# `x = data[s : s + block_size]` and `y = data[s + 1 : s + block_size + 1]` stacked: two
# `(batch_size, block_size)` int64 tensors on `data`'s device. `generator` is a `torch.Generator`,
# or an int seed to make one from.

# %% tags=["graded"]
import math

import torch


def adamw_step(param, grad, m, v, step, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """One AdamW update of one tensor at step t = `step` (from 1). Returns new (param, m, v)."""
    # BEGIN SOLUTION: adamw_step: moments, bias correction, decoupled decay, eps after the sqrt
    beta1, beta2 = betas
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    m_hat = m / (1 - beta1 ** step)
    v_hat = v / (1 - beta2 ** step)
    param = param - lr * weight_decay * param - lr * m_hat / (v_hat.sqrt() + eps)
    return param, m, v
    # END SOLUTION


class AdamW:
    """AdamW over a list of parameters (weight decay on all of them), with your adamw_step."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = [p for p in params]
        self.lr, self.betas, self.eps, self.weight_decay = lr, betas, eps, weight_decay
        # BEGIN SOLUTION: AdamW.__init__: zero moments per parameter and a step counter
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0
        # END SOLUTION

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr=None):
        """Update every parameter that has a gradient, with learning rate `lr` (default self.lr)."""
        # BEGIN SOLUTION: AdamW.step: count the step, then adamw_step for each parameter, writing in place
        self.t += 1
        lr = self.lr if lr is None else lr
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            new, self.m[i], self.v[i] = adamw_step(p, p.grad, self.m[i], self.v[i], self.t, lr, self.betas,
                                                   self.eps, self.weight_decay)
            p.copy_(new)
        # END SOLUTION


def lr_at(step, max_lr, warmup_steps, total_steps, min_lr=0.0):
    """Learning rate at `step` (from 0): linear warmup, then cosine decay to min_lr at total_steps."""
    # BEGIN SOLUTION: lr_at: warmup (step + 1) / warmup_steps, cosine between warmup_steps and total_steps, min_lr after
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * progress)) / 2
    # END SOLUTION


def clip_grads(grads, max_norm):
    """Global-norm clipping: -> (list of new tensors, total norm before clipping as a float)."""
    # BEGIN SOLUTION: clip_grads: one norm over all tensors, one factor min(1, max_norm / (norm + 1e-6))
    total = torch.sqrt(sum((g.double() ** 2).sum() for g in grads))
    factor = min(1.0, max_norm / (float(total) + 1e-6))
    return [g * factor for g in grads], float(total)
    # END SOLUTION


def get_batch(data, batch_size, block_size, generator):
    """Random crops of a 1-D id tensor -> x, y: (batch_size, block_size) int64, y shifted by one."""
    # BEGIN SOLUTION: get_batch: starts = randint(0, len - block_size) with the generator; stack crops
    if isinstance(generator, int):
        generator = torch.Generator().manual_seed(generator)
    starts = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[s:s + block_size] for s in starts.tolist()])
    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])
    return x.long(), y.long()
    # END SOLUTION


# %% [markdown]
# ## Q6. Training a character-level Shakespeare LM
#
# `train_lm(train_ids, config, settings, init_state=None)` trains `TransformerLM(**config)` and
# returns `(state_dict, losses)`: the trained model's `state_dict()` (names as in Q4) and the list of
# training losses, one float per step. The grader fixes `settings` (a dict with `steps`,
# `batch_size`, `block_size`, `max_lr`, `min_lr`, `warmup_steps`, `weight_decay`, `betas`, `eps`,
# `grad_clip` and `seed`) and scores your model itself, on plays you never see.
#
# Do exactly this, so that the grader can reproduce your first steps:
# 1. `torch.manual_seed(seed)`, build the model on `train_ids.device` (the grader may send a GPU
#    tensor); if `init_state` is given, load it (`load_state_dict`); one
#    `torch.Generator().manual_seed(seed)` for all batches.
# 2. For each `step` in `range(steps)`: `lr = lr_at(step, max_lr, warmup_steps, steps, min_lr)`;
#    `x, y = get_batch(train_ids, batch_size, block_size, generator)`; the loss is the mean
#    cross-entropy of the logits `model(x)` against `y`; gradients by `loss.backward()`; clip them
#    all together with `clip_grads` to `grad_clip`; one `AdamW` step with `lr` (AdamW created once,
#    over `model.parameters()`, with `betas`, `eps`, `weight_decay`).
#
# The grader first runs one and two steps on a stream where every batch is the same and compares
# your parameters with its own update, then trains on Shakespeare and on a synthetic language whose
# best possible perplexity is known.
#
# **Only a model your function trains, from the start it is given, earns points.** For each
# submission the grader draws its own `init_state` and `seed`, replays your first steps from them,
# and checks that the weights you return descend from that `init_state` through your steps. Weights
# trained anywhere else, loaded from a file or a string, or grown from another start (a model you
# re-create or re-initialize) earn nothing, however good their perplexity.

# %% tags=["graded"]
import torch
import torch.nn.functional as F


def train_lm(train_ids, config, settings, init_state=None):
    """Train TransformerLM(**config) on a 1-D id tensor -> (state_dict, list of per-step losses)."""
    # BEGIN SOLUTION: train_lm: seed, model (+ init_state), AdamW, then per step lr_at, get_batch, loss, backward, clip_grads, step
    s = settings
    torch.manual_seed(s["seed"])
    model = TransformerLM(**config).to(train_ids.device)
    if init_state is not None:
        model.load_state_dict(init_state)
    params = list(model.parameters())
    optimizer = AdamW(params, lr=s["max_lr"], betas=tuple(s["betas"]), eps=s["eps"], weight_decay=s["weight_decay"])
    generator = torch.Generator().manual_seed(s["seed"])
    losses = []
    for step in range(s["steps"]):
        lr = lr_at(step, s["max_lr"], s["warmup_steps"], s["steps"], s["min_lr"])
        x, y = get_batch(train_ids, s["batch_size"], s["block_size"], generator)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])
        for p, g in zip(params, clipped):
            p.grad = g
        optimizer.step(lr)
        losses.append(loss.item())
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, losses
    # END SOLUTION


# %% [markdown]
# Train it yourself (not graded; about half a minute on a laptop CPU), plot the loss and read a
# sample. The grader uses the same settings.

# %%
import matplotlib.pyplot as plt

from autograder.data import shakespeare

torch.set_num_threads(1)  # a model this small trains fastest on one thread (no thread contention)
text = shakespeare.text("train")
chars = sorted(set(text))
stoi = {c: i for i, c in enumerate(chars)}
train_ids = torch.tensor([stoi[c] for c in text], dtype=torch.long)
config = dict(vocab_size=len(chars), d_model=64, n_layers=2, n_heads=4, d_ff=256, max_len=64)
settings = dict(steps=400, batch_size=16, block_size=64, max_lr=3e-3, min_lr=3e-4, warmup_steps=40,
                weight_decay=0.01, betas=(0.9, 0.99), eps=1e-8, grad_clip=1.0, seed=1)
state, losses = train_lm(train_ids, config, settings)
plt.plot(losses)
plt.xlabel("step")
plt.ylabel("training loss (nats / char)")
plt.show()

# %% tags=["figure"]
steps = range(settings["steps"])
schedule = [lr_at(s, settings["max_lr"], settings["warmup_steps"], settings["steps"], settings["min_lr"]) for s in steps]
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
ax1.plot(steps, schedule)
ax1.set(xlabel="step", ylabel="learning rate", title="lr_at: warmup, then cosine")
ax2.plot(losses)
ax2.set(xlabel="step", ylabel="training loss (nats / char)", title="your train_lm")
fig.tight_layout()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 1: the learning-rate schedule
#
# Put your loss curve beside the schedule. Why does training start with a warmup instead of the
# full learning rate at step 0 (think of Adam's second-moment estimate in the first steps, and of
# the random initial weights), and why decay to `min_lr` at the end? Where on your curve does the
# loss fall fastest, and what happens to its noise as the rate decays?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* In the first steps Adam's estimate of each gradient's second moment comes from
# very few gradients, so its per-parameter step sizes are unreliable, and the random initial weights
# give large, badly aligned gradients: a full learning rate at once can throw the weights into a
# region the model has trouble leaving (loss spikes, saturated softmaxes, diverging norms). The
# warmup lets the moment estimates settle while steps are small. The loss falls fastest early, right
# after the warmup, when the rate is near its maximum and the model learns the easy structure
# (character frequencies, common pairs). Decaying the rate later shrinks the steps, so the noise of
# the minibatch loss narrows and the weights settle into a minimum instead of bouncing around it;
# ending at `min_lr` rather than 0 keeps the last steps useful.

# %% [markdown]
# ## Q7. Generation with a KV cache
#
# Generating token by token with `model(idx)` recomputes every earlier position at every step.
# With a **KV cache** each layer keeps the keys and values of the positions seen so far, and a
# step only computes the new token's query, key and value. Complete the `cache` paths of
# `MultiHeadAttention.forward`, `Block.forward` and `TransformerLM.forward` (see their
# docstrings): `model(new_tokens, cache) -> (logits, cache)`, cache layout one `(k, v)` per layer,
# each `(B, n_heads, T_past, d_head)`, growing by exactly the number of new tokens.
#
# **Filtering** `filter_logits(logits, temperature=1.0, top_k=None, top_p=None)` divides by the
# temperature, then returns logits with the removed tokens set to `-inf` (last dimension = vocabulary):
# - top-k keeps every token whose logit is **at least the k-th largest** (ties at the boundary are
#   all kept, so more than k tokens may stay);
# - top-p keeps token $i$ when the total probability of the tokens **strictly more probable** than
#   $i$ is **less than** $p$ (softmax of the tempered logits). So the token at which the running
#   total reaches or crosses $p$ is kept, ties of a kept token are kept, and once the tokens above
#   a token already sum to exactly $p$ that token is dropped. Apply top-k first, then top-p on what is left.
#
# `generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=0,
# use_cache=True)` returns `idx` followed by the new tokens, `(B, T + max_new_tokens)` int64.
# `temperature=0` means greedy (argmax; the lowest id among equal maxima). Otherwise sample from
# `softmax(filter_logits(...))` with `torch.multinomial(..., generator=g)`, one generator
# `torch.Generator(device=idx.device).manual_seed(seed)` per call. With `use_cache`, feed the prompt once with an empty cache,
# then one token per step; without, recompute `model(idx)` every step.
# The caller keeps `T + max_new_tokens <= model.max_len` (no cropping needed).

# %% tags=["graded"]
import torch


def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    """Temperature, then top-k, then top-p on the last dimension; removed tokens get -inf."""
    # BEGIN SOLUTION: filter_logits: divide by temperature; keep >= k-th largest; keep tokens whose strictly-larger mass < p
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        probs = torch.softmax(logits, dim=-1)
        above = (probs[..., None, :] * (probs[..., None, :] > probs[..., :, None])).sum(-1)  # (..., V)
        logits = logits.masked_fill(above >= top_p, float("-inf"))
    return logits
    # END SOLUTION


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None, seed=0, use_cache=True):
    """Extend idx (B, T) by max_new_tokens tokens -> (B, T + max_new_tokens) int64."""
    # BEGIN SOLUTION: generate: prompt through the model (with [] cache), then per step pick the next token and feed only it
    generator = torch.Generator(device=idx.device).manual_seed(seed)
    cache = [] if use_cache else None
    new = idx
    for _ in range(max_new_tokens):
        if use_cache:
            logits, cache = model(new, cache)
        else:
            logits = model(idx)
        logits = logits[:, -1, :]  # (B, V)
        if temperature == 0:
            nxt = logits.argmax(dim=-1, keepdim=True)
        else:
            probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        idx = torch.cat([idx, nxt], dim=1)
        new = nxt
    return idx
    # END SOLUTION


# %% [markdown]
# A sample from the model you trained above (not graded), and the speed-up of the cache:

# %%
import time

model = TransformerLM(**config)
model.load_state_dict(state)
model.eval()
prompt = torch.tensor([[stoi[c] for c in "ROMEO:\n"]])
out = generate(model, prompt, config["max_len"] - prompt.shape[1], temperature=0.8, top_k=10, seed=0)
print("".join(chars[i] for i in out[0].tolist()))
for use_cache in (True, False):
    start = time.perf_counter()
    generate(model, prompt, config["max_len"] - prompt.shape[1], temperature=0, use_cache=use_cache)
    print(f"greedy, use_cache={use_cache}: {time.perf_counter() - start:.3f} s")

# %% [markdown]
# ## Q8. An encoder–decoder Transformer
#
# The encoder is a stack of your blocks **without** the causal mask (`Block(..., causal=False)`):
# every source position sees the whole source. A `DecoderBlock` has three sublayers, each pre-norm
# with a residual: causal self-attention (`norm1`, `self_attn`), **cross-attention** whose queries
# come from the decoder and whose keys and values come from the encoder output `memory`
# (`norm2`, `cross_attn`), and the MLP (`norm3`, `mlp`).
#
# `Seq2Seq` shares one token embedding `emb` for source and target (and as its tied output head),
# adds learned positions `pos_emb` to both, runs `encoder` (then `enc_norm`) and `decoder` (then
# `dec_norm`). `encode(src) -> memory (B, S, d)`, `decode(tgt_in, memory) -> logits (B, T, V)`,
# `forward(src, tgt_in) = decode(tgt_in, encode(src))`.
#
# The task: **sort a string of digits**. Tokens 0–9 are digits, 10 is `BOS`. The decoder input is
# `[BOS] + target[:-1]` (teacher forcing) and it predicts `target`. `greedy_decode(model, src, n, bos)`
# returns the `n` tokens after `BOS`, `(B, n)` int64, argmax at each step.
# `train_seq2seq(src, tgt, config, settings, init_state=None)` trains `Seq2Seq(**config)` with your Q5
# pieces (the same loop as `train_lm`: `torch.manual_seed(seed)`, the model on `src.device`, loaded from
# `init_state` when one is given, batches of `batch_size` random rows of `src`/`tgt` drawn with
# `torch.randint(0, N, (batch_size,), generator=g)`), and returns its `state_dict()`. The grader
# scores exact-match accuracy on fresh strings it draws itself, and, as in Q6, only for weights your
# function trained from the `init_state` and `seed` it sends: weights from anywhere else earn nothing.

# %% tags=["graded"]
import torch
import torch.nn.functional as F
from torch import nn


class DecoderBlock(nn.Module):
    """Pre-norm decoder block: causal self-attention, cross-attention to memory, MLP."""

    def __init__(self, d_model, n_heads, d_ff, bias=True):
        super().__init__()
        self.norm1, self.self_attn = LayerNorm(d_model, bias=bias), MultiHeadAttention(d_model, n_heads, bias=bias)
        self.norm2, self.cross_attn = LayerNorm(d_model, bias=bias), MultiHeadAttention(d_model, n_heads, bias=bias)
        self.norm3, self.mlp = LayerNorm(d_model, bias=bias), MLP(d_model, d_ff, bias=bias)

    def forward(self, x, memory):
        """x: (B, T, d_model), memory: (B, S, d_model) -> (B, T, d_model)."""
        # BEGIN SOLUTION: DecoderBlock.forward: three pre-norm residual sublayers; cross-attention keys/values from memory
        x = x + self.self_attn(self.norm1(x), causal=True)
        x = x + self.cross_attn(self.norm2(x), context=memory)
        return x + self.mlp(self.norm3(x))
        # END SOLUTION


class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer with a shared, tied embedding and learned positions."""

    def __init__(self, vocab_size, d_model, n_heads, d_ff, n_layers, max_len):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.encoder = nn.ModuleList([Block(d_model, n_heads, d_ff, causal=False) for _ in range(n_layers)])
        self.enc_norm = LayerNorm(d_model)
        self.decoder = nn.ModuleList([DecoderBlock(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.dec_norm = LayerNorm(d_model)
        self.apply(small_init)

    def embed(self, ids):
        return self.emb(ids) + self.pos_emb(torch.arange(ids.shape[1], device=ids.device))

    def encode(self, src):
        """src: (B, S) -> memory (B, S, d_model)."""
        # BEGIN SOLUTION: Seq2Seq.encode: embed, encoder blocks, enc_norm
        x = self.embed(src)
        for block in self.encoder:
            x = block(x)
        return self.enc_norm(x)
        # END SOLUTION

    def decode(self, tgt_in, memory):
        """tgt_in: (B, T), memory: (B, S, d_model) -> logits (B, T, vocab_size), head tied to emb."""
        # BEGIN SOLUTION: Seq2Seq.decode: embed, decoder blocks with memory, dec_norm, logits with emb.weight
        x = self.embed(tgt_in)
        for block in self.decoder:
            x = block(x, memory)
        return self.dec_norm(x) @ self.emb.weight.T
        # END SOLUTION

    def forward(self, src, tgt_in):
        return self.decode(tgt_in, self.encode(src))


@torch.no_grad()
def greedy_decode(model, src, n, bos):
    """The n tokens after BOS, argmax at each step -> (B, n) int64."""
    # BEGIN SOLUTION: greedy_decode: encode once, grow the decoder input from [BOS] by argmax
    memory = model.encode(src)
    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    for _ in range(n):
        nxt = model.decode(out, memory)[:, -1].argmax(dim=-1, keepdim=True)
        out = torch.cat([out, nxt], dim=1)
    return out[:, 1:]
    # END SOLUTION


def train_seq2seq(src, tgt, config, settings, init_state=None):
    """Train Seq2Seq(**config) (from init_state when given) on pairs (src (N, S), tgt (N, T)) with teacher forcing
    -> state_dict."""
    # BEGIN SOLUTION: train_seq2seq: the train_lm loop (seed, model, init_state) on random rows, decoder input [BOS] + tgt[:, :-1]
    s = settings
    torch.manual_seed(s["seed"])
    model = Seq2Seq(**config).to(src.device)
    if init_state is not None:  # the grader's start
        model.load_state_dict(init_state)
    params = list(model.parameters())
    optimizer = AdamW(params, lr=s["max_lr"], betas=tuple(s["betas"]), eps=s["eps"], weight_decay=s["weight_decay"])
    generator = torch.Generator().manual_seed(s["seed"])
    bos = torch.full((s["batch_size"], 1), s["bos"], dtype=torch.long, device=src.device)
    for step in range(s["steps"]):
        lr = lr_at(step, s["max_lr"], s["warmup_steps"], s["steps"], s["min_lr"])
        rows = torch.randint(0, src.shape[0], (s["batch_size"],), generator=generator).to(src.device)
        x, y = src[rows], tgt[rows]
        logits = model(x, torch.cat([bos, y[:, :-1]], dim=1))
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        clipped, _ = clip_grads([p.grad for p in params], s["grad_clip"])
        for p, g in zip(params, clipped):
            p.grad = g
        optimizer.step(lr)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
    # END SOLUTION


# %% tags=["figure"]
def block_grad_norms(post_norm):
    """The gradient norm reaching each block's parameters at initialization, 12 blocks deep."""
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=65, d_model=64, n_layers=12, n_heads=4, d_ff=256, max_len=64, post_norm=post_norm)
    x, y = torch.randint(0, 65, (16, 64)), torch.randint(0, 65, (16, 64))
    F.cross_entropy(model(x).reshape(-1, 65), y.reshape(-1)).backward()
    return [float(torch.sqrt(sum((p.grad ** 2).sum() for p in block.parameters()))) for block in model.blocks]


fig, ax = plt.subplots(figsize=(6, 3.2))
for post_norm, label in ((False, "pre-norm"), (True, "post-norm")):
    ax.semilogy(range(1, 13), block_grad_norms(post_norm), marker="o", label=label)
ax.set(xlabel="block (1 = nearest the embeddings)", ylabel="gradient norm at init")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 2: pre-norm against post-norm
#
# Your plot shows the gradient reaching each of 12 blocks at initialization, for your pre-norm and
# post-norm `TransformerLM`. Describe the two curves and explain them from where the normalization
# sits relative to the residual connection. Which of the two would you expect to need a careful
# warmup, and which would you pick to train a deeper model?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* In the pre-norm model every block gets a sizeable gradient (about 0.1 to 0.4 here,
# larger nearer the embeddings): the residual stream $x + f(\mathrm{norm}(x))$ passes the gradient
# from the loss down to every block through an identity path, and each block adds its own branch.
# In the post-norm model, $\mathrm{norm}(x + f(x))$ puts a normalization on the residual path after
# every block; each one rescales the gradient passing through it, and here all blocks but the first
# get a gradient an order of magnitude smaller (about 0.015). Post-norm is the one that needs a long,
# careful warmup (its effective step sizes differ from layer to layer and small early gradients are
# easily swamped); pre-norm trains deep stacks stably with little or no warmup, which is why current
# decoder-only models use it (with a final norm before the head).

# %% [markdown]
# ## Done?
#
# Save the notebook, run the public checks one last time, then make the PDF of your written
# answers with `lmgrade export transformer.ipynb` and upload it to the written assignment. Submit
# `transformer.ipynb`.

# %%
from autograder import check_notebook
check_notebook(assignment="transformer")
