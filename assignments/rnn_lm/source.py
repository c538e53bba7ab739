# %% [markdown]
# # Homework 3: recurrent language models from scratch
#
# A recurrent network reads a sequence one token at a time and carries a **hidden state** from
# each step to the next, so that its prediction at step $t$ can depend on everything before $t$.
# In this homework you build recurrent language models in PyTorch from the bare operations, train
# one on Shakespeare, decode from it, and end with an encoder–decoder with attention.
#
# | part | what you write | idea from the lecture |
# | --- | --- | --- |
# | Q1 | `RNNCell.forward`, `RNNLayer.forward` | the Elman RNN |
# | Q2 | `LSTMCell.forward`, `LSTMLayer.forward` (and `GRUCell`, `GRULayer` for extra credit) | gates |
# | Q3 | `RNNLM` (tied weights, `forward`), `lm_loss` | the RNN language model, teacher forcing |
# | Q4 | `batchify`, `get_chunk`, `detach_state`, `clip_grad_norm`, `train_lm` | truncated BPTT, gradient clipping |
# | Q5 | `hidden_grad_norms` | vanishing and exploding gradients |
# | Q6 | `greedy_decode`, `sample`, `beam_search` | decoding |
# | Q7 | (your Q2–Q4 code) | a character-level LSTM on Shakespeare |
# | Q8 | `AdditiveAttention`, `Seq2Seq`, `train_seq2seq`, `greedy_translate` | encoder–decoder with attention |
#
# **Rules.** Write the recurrences yourself. PyTorch's built-in recurrent modules (`nn.RNN`,
# `nn.LSTM`, `nn.GRU`, their `...Cell` versions) and the functions behind them (`torch._VF`,
# `torch.lstm`, `torch.gru`, `torch.rnn_tanh`, `torch.lstm_cell`, ...) are not allowed in graded
# cells: the grader resolves every name in your graded cells as Python does, detects them under any
# alias, and withholds the points of every check that grades code using them; getting round the ban
# counts as not attempting the question. Your own names are yours: a variable or attribute called
# `lstm` is fine. Everything else in `torch` is fine: `nn.Linear`, `nn.Embedding`, `torch.sigmoid`,
# `F.cross_entropy`, `torch.optim.SGD`, ...
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
# **Conventions.** Shapes are written `(B, T, d)`: batch, time, features. Everything is
# **batch first**. A recurrent *state* is a tensor `h` of shape `(B, H)` for an Elman RNN or a GRU,
# and a tuple `(h, c)` for an LSTM. Your code must run unchanged on a GPU and in float64: never
# create a tensor with a fixed device or dtype (`x.new_zeros(...)`, `torch.zeros_like(x)`, or
# `device=x.device, dtype=x.dtype`). The grader also runs your functions, modules and training loops
# on a simulated accelerator that holds real values (as a GPU would: `.item()` works, a CPU tensor
# mixed into its computation fails), and compares the results with the same call's on the CPU.
#
# **How grading works.** Only cells marked as *graded* are graded, by name: keep the names,
# signatures and the parameter names set in `__init__` (the grader loads its own weights into your
# modules by these names and compares with PyTorch's modules holding the same weights). Graded cells
# must only define things: no training or printing there. Save the notebook, then run the public
# checks:

# %%
from autograder import check_notebook
check_notebook(assignment="rnn_lm")  # finds this notebook; add question=2 to check one question

# %% [markdown]
# ## Q1. The Elman RNN
#
# At each step the Elman cell mixes the input $x_t$ with the previous state $h_{t-1}$:
#
# $$h_t = \tanh\left(W_{ih} x_t + b_{ih} + W_{hh} h_{t-1} + b_{hh}\right).$$
#
# The parameters have the names and shapes of `torch.nn.RNNCell`: `weight_ih` `(H, d)`,
# `weight_hh` `(H, H)`, `bias_ih` and `bias_hh` `(H,)`. With a batch, $x$ is `(B, d)` and $h$ is
# `(B, H)`, so $W_{ih} x_t$ is `x @ weight_ih.T`.
#
# `RNNLayer` runs the cell over a `(B, T, d)` batch, starting from `h0` (zeros when `h0` is
# `None`), and returns every hidden state `(B, T, H)` and the last one `(B, H)`, like
# `nn.RNN(d, H, batch_first=True)`.

# %% tags=["graded"]
import math

import torch
from torch import nn


class RNNCell(nn.Module):
    """One step of an Elman RNN (tanh)."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(hidden_size))
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x, h):
        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""
        # BEGIN SOLUTION: RNNCell.forward: tanh of the two affine maps, x @ weight_ih.T + bias_ih and h @ weight_hh.T + bias_hh
        return torch.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)
        # END SOLUTION


class RNNLayer(nn.Module):
    """An Elman RNN over a whole batch of sequences."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = RNNCell(input_size, hidden_size)

    def forward(self, x, h0=None):
        """x: (B, T, input_size), h0: (B, hidden_size) or None for zeros.

        Returns (outputs, h_T): outputs (B, T, hidden_size) holds every state h_1..h_T, h_T (B, hidden_size).
        """
        # BEGIN SOLUTION: RNNLayer.forward: start from h0 (or x.new_zeros), apply self.cell at each step t, stack the states on dim 1
        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0
        outputs = []
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)  # (B, H)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h
        # END SOLUTION


# %% [markdown]
# ## Q2. The LSTM (and the GRU, extra credit)
#
# The LSTM keeps a second state, the **cell** $c_t$, that is updated additively, and four gates
# computed from $x_t$ and $h_{t-1}$. In PyTorch's order **i, f, g, o** (input, forget, cell
# candidate, output), stacked in one `(4H, d)` matrix `weight_ih` and one `(4H, H)` matrix
# `weight_hh` (rows `0:H` are the input gate, `H:2H` the forget gate, and so on):
#
# $$\begin{aligned}
# i_t &= \sigma(W_{ii} x_t + b_{ii} + W_{hi} h_{t-1} + b_{hi}) &
# f_t &= \sigma(W_{if} x_t + b_{if} + W_{hf} h_{t-1} + b_{hf}) \\
# g_t &= \tanh(W_{ig} x_t + b_{ig} + W_{hg} h_{t-1} + b_{hg}) &
# o_t &= \sigma(W_{io} x_t + b_{io} + W_{ho} h_{t-1} + b_{ho}) \\
# c_t &= f_t \odot c_{t-1} + i_t \odot g_t &
# h_t &= o_t \odot \tanh(c_t)
# \end{aligned}$$
#
# `LSTMCell.forward(x, state)` takes `state = (h, c)` and returns the new `(h, c)`; `LSTMLayer`
# returns `(outputs, (h_T, c_T))`, like `nn.LSTM(d, H, batch_first=True)` (whose initial state is
# zeros when none is given).
#
# **Extra credit: the GRU** (order **r, z, n** as in `nn.GRU`, `weight_ih` `(3H, d)`):
# $r = \sigma(W_{ir} x + b_{ir} + W_{hr} h + b_{hr})$, $z = \sigma(W_{iz} x + b_{iz} + W_{hz} h + b_{hz})$,
# $n = \tanh(W_{in} x + b_{in} + r \odot (W_{hn} h + b_{hn}))$, $h' = (1 - z) \odot n + z \odot h$.
# Note that the reset gate multiplies $W_{hn} h + b_{hn}$, bias included.

# %% tags=["graded"]
import math

import torch
from torch import nn


class LSTMCell(nn.Module):
    """One step of an LSTM, gates in the order i, f, g, o."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden_size))
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x, state):
        """x: (B, input_size), state = (h, c), each (B, hidden_size) -> the next (h, c)."""
        # BEGIN SOLUTION: LSTMCell.forward: one (B, 4H) matrix of gate pre-activations, split in i, f, g, o; c' = f*c + i*g, h' = o*tanh(c')
        h, c = state
        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4H)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return h, c
        # END SOLUTION


class LSTMLayer(nn.Module):
    """An LSTM over a whole batch of sequences."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = LSTMCell(input_size, hidden_size)

    def forward(self, x, state=None):
        """x: (B, T, input_size), state = (h0, c0) or None for zeros.

        Returns (outputs, (h_T, c_T)): outputs (B, T, hidden_size) holds h_1..h_T.
        """
        # BEGIN SOLUTION: LSTMLayer.forward: as RNNLayer.forward, carrying the pair (h, c)
        if state is None:
            h = x.new_zeros(x.size(0), self.cell.hidden_size)
            state = (h, h)
        outputs = []
        for t in range(x.size(1)):
            state = self.cell(x[:, t], state)
            outputs.append(state[0])
        return torch.stack(outputs, dim=1), state
        # END SOLUTION


class GRUCell(nn.Module):
    """Extra credit: one step of a GRU, gates in the order r, z, n."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.weight_ih = nn.Parameter(torch.empty(3 * hidden_size, input_size))
        self.weight_hh = nn.Parameter(torch.empty(3 * hidden_size, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(3 * hidden_size))
        self.bias_hh = nn.Parameter(torch.empty(3 * hidden_size))
        bound = 1.0 / math.sqrt(hidden_size)
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x, h):
        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""
        # BEGIN SOLUTION: GRUCell.forward: input and hidden pre-activations split in r, z, n; the reset gate scales the hidden part of n
        x_r, x_z, x_n = (x @ self.weight_ih.T + self.bias_ih).chunk(3, dim=-1)
        h_r, h_z, h_n = (h @ self.weight_hh.T + self.bias_hh).chunk(3, dim=-1)
        r = torch.sigmoid(x_r + h_r)
        z = torch.sigmoid(x_z + h_z)
        n = torch.tanh(x_n + r * h_n)
        return (1 - z) * n + z * h
        # END SOLUTION


class GRULayer(nn.Module):
    """Extra credit: a GRU over a whole batch of sequences."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = GRUCell(input_size, hidden_size)

    def forward(self, x, h0=None):
        """x: (B, T, input_size), h0: (B, hidden_size) or None -> (outputs (B, T, hidden_size), h_T)."""
        # BEGIN SOLUTION: GRULayer.forward: as RNNLayer.forward
        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0
        outputs = []
        for t in range(x.size(1)):
            h = self.cell(x[:, t], h)
            outputs.append(h)
        return torch.stack(outputs, dim=1), h
        # END SOLUTION


# %% [markdown]
# ## Q3. The RNN language model
#
# An RNN LM embeds each token, runs a recurrent layer, and projects every hidden state to logits
# over the vocabulary: the logits at position $t$ predict the token at $t + 1$.
#
# **Tied weights** (Press & Wolf, 2017; Inan et al., 2017): the output projection reuses the
# embedding matrix, `proj.weight` *is* `embedding.weight` (one parameter, shape `(V, d)`), which
# needs `emb_dim == hidden_size`. It saves $V \cdot d$ parameters and often helps.
#
# **Teacher forcing.** To train on a batch of sequences `tokens` `(B, T)`, feed the true tokens
# `tokens[:, :-1]` as inputs and predict `tokens[:, 1:]`: the model never sees its own mistakes
# during training. `lm_loss` returns the mean cross-entropy over the predicted tokens; when a
# `pad_id` is given, sequences are padded at the end with it, and positions whose **target** is
# padding are left out of the mean (a mean over real tokens only, not over `B * (T - 1)`).
# A confident model has logits of hundreds: `-log(softmax(z))` then takes the log of an underflowed
# 0 (infinite loss); `F.cross_entropy` (or `log_softmax`) computes it stably.
#
# `layer` is the class of the recurrent layer (`RNNLayer`, `LSTMLayer` or `GRULayer`); all three
# take and return a state as in Q1 and Q2, so `forward` does not need to know which one it has.

# %% tags=["graded"]
import torch
import torch.nn.functional as F
from torch import nn


class RNNLM(nn.Module):
    """Embedding -> recurrent layer -> linear projection to the vocabulary."""

    def __init__(self, vocab_size, emb_dim, hidden_size, layer=LSTMLayer, tie_weights=False):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, emb_dim)
        self.rnn = layer(emb_dim, hidden_size)
        self.proj = nn.Linear(hidden_size, vocab_size)
        if tie_weights:
            # BEGIN SOLUTION: RNNLM tied weights: check emb_dim == hidden_size (ValueError), then make proj.weight the embedding's parameter
            if emb_dim != hidden_size:
                raise ValueError(f"tied weights need emb_dim == hidden_size, got {emb_dim} and {hidden_size}")
            self.proj.weight = self.embedding.weight
            # END SOLUTION

    def forward(self, tokens, state=None):
        """tokens: (B, T) int64 -> (logits (B, T, vocab_size), final state of the recurrent layer)."""
        # BEGIN SOLUTION: RNNLM.forward: embed, run self.rnn from `state`, project every output
        outputs, state = self.rnn(self.embedding(tokens), state)  # (B, T, H)
        return self.proj(outputs), state
        # END SOLUTION


def lm_loss(model, tokens, pad_id=None):
    """Teacher-forced mean cross-entropy (nats) of model on tokens (B, T), T >= 2, as a 0-dim tensor.

    Inputs tokens[:, :-1], targets tokens[:, 1:]; targets equal to pad_id (if given) are not counted.
    """
    # BEGIN SOLUTION: lm_loss: logits of the inputs, cross-entropy against the shifted targets, mean over non-pad targets
    logits, _ = model(tokens[:, :-1])  # (B, T-1, V)
    targets = tokens[:, 1:]  # (B, T-1)
    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")
    if pad_id is None:
        return losses.mean()
    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)
    return (losses * keep).sum() / keep.sum()
    # END SOLUTION


# %% [markdown]
# ## Q4. Truncated backpropagation through time
#
# A language model is trained on one long stream of tokens. **`batchify(stream, B)`** cuts it into
# `B` contiguous pieces of length `L = N // B` (the last `N % B` tokens are dropped) and stacks them
# as the rows of a `(B, L)` tensor: row `b` is `stream[b*L:(b+1)*L]`, so each row reads on
# smoothly from one column to the next.
#
# **`get_chunk(data, i, bptt)`** returns the inputs `data[:, i:i+n]` and the targets
# `data[:, i+1:i+1+n]` with `n = min(bptt, L - 1 - i)` (the last chunk may be shorter).
#
# **Truncated BPTT.** Backpropagating through the whole stream is impossible, so we backpropagate
# through `bptt` steps at a time, but we still **carry** the hidden state from one chunk to the
# next (row `b` of chunk $k+1$ continues row `b` of chunk $k$). The state is **detached** first:
# its value is kept, its history is cut, so no gradient crosses a chunk boundary.
# `detach_state` detaches a state (a tensor, or a tuple of tensors for an LSTM) and returns a new
# state without changing its argument.
#
# **Gradient clipping.** RNN gradients occasionally explode. `clip_grad_norm(parameters, max_norm)`
# computes the **global** norm $\|g\| = \sqrt{\sum_p \|g_p\|^2}$ over the gradients of all
# parameters (those whose `.grad` is not `None`), and if it exceeds `max_norm` scales **every**
# gradient in place by `max_norm / (‖g‖ + 1e-6)`, as `torch.nn.utils.clip_grad_norm_` does. It
# returns the norm before clipping as a Python float.
#
# **`train_lm(model, stream, *, steps, lr, batch_size, bptt, clip)`** puts it together:
#
# 1. `data = batchify(stream, batch_size)` on the model's device; an optimizer
#    `torch.optim.SGD(model.parameters(), lr=lr)`; the state starts as `None` at position `i = 0`.
# 2. Each of the `steps` steps: if fewer than two tokens are left (`i >= L - 1`), start over:
#    `i = 0` and state `None`. Take the chunk at `i`, detach the carried state, run
#    `model(inputs, state)`, compute the mean cross-entropy over every target of the chunk, zero
#    the gradients, backpropagate, `clip_grad_norm(model.parameters(), clip)`, take the optimizer
#    step, and move on: `i += bptt`.
# 3. Return the list of the `steps` losses (floats).
#
# The model is any module with `forward(tokens, state) -> (logits, state)`: your `RNNLM`, or the
# tiny `ToyRecurrentLM` given below for testing (the grader uses it too, so that a bug in Q1–Q3
# does not cost Q4). Everything is deterministic: the same model and stream give the same losses.

# %% tags=["graded"]
import torch
import torch.nn.functional as F
from torch import nn


class ToyRecurrentLM(nn.Module):
    """Given, for testing training loops and decoders: s_t = decay * s_{t-1} + E[x_t], logits_t = W s_t + b.

    With pair_state=True its state is a pair (s, s), as an LSTM's (h, c) is: code that passes states on
    must work with both kinds.
    """

    def __init__(self, vocab_size, dim, decay=0.5, pair_state=False):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.proj = nn.Linear(dim, vocab_size)
        self.decay = decay
        self.pair_state = pair_state

    def forward(self, tokens, state=None):
        e = self.embedding(tokens)  # (B, T, d)
        s = torch.zeros_like(e[:, 0]) if state is None else state[0] if isinstance(state, tuple) else state
        states = []
        for t in range(tokens.size(1)):
            s = self.decay * s + e[:, t]
            states.append(s)
        return self.proj(torch.stack(states, dim=1)), ((s, s) if self.pair_state else s)


def batchify(stream, batch_size):
    """stream: (N,) int64 -> (batch_size, N // batch_size), row b = stream[b*L:(b+1)*L]."""
    # BEGIN SOLUTION: batchify: drop the last N % batch_size tokens, then view as (batch_size, L)
    L = stream.size(0) // batch_size
    return stream[: batch_size * L].reshape(batch_size, L).clone()
    # END SOLUTION


def get_chunk(data, i, bptt):
    """data: (B, L) -> (inputs data[:, i:i+n], targets data[:, i+1:i+1+n]), n = min(bptt, L - 1 - i)."""
    # BEGIN SOLUTION: get_chunk: n = min(bptt, L - 1 - i); inputs start at i, targets one later
    n = min(bptt, data.size(1) - 1 - i)
    return data[:, i:i + n], data[:, i + 1:i + 1 + n]
    # END SOLUTION


def detach_state(state):
    """The same state (a tensor or a tuple of tensors) cut from its history; None stays None."""
    # BEGIN SOLUTION: detach_state: .detach() a tensor, or each tensor of a tuple
    if state is None:
        return None
    if isinstance(state, torch.Tensor):
        return state.detach()
    return tuple(detach_state(s) for s in state)
    # END SOLUTION


def clip_grad_norm(parameters, max_norm):
    """Scale all gradients in place so that their global norm is at most max_norm; return the norm before."""
    # BEGIN SOLUTION: clip_grad_norm: global norm over every p.grad; if above max_norm multiply every grad by max_norm / (norm + 1e-6)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return 0.0
    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))
    if total > max_norm:
        for g in grads:
            g.mul_(max_norm / (total + 1e-6))
    return float(total)
    # END SOLUTION


def train_lm(model, stream, *, steps, lr, batch_size, bptt, clip):
    """Truncated BPTT with SGD and global-norm clipping over `stream` (N,); returns the list of losses."""
    # BEGIN SOLUTION: train_lm: batchify, then per step: wrap around at the end, get_chunk, detach the state, forward, loss, backward, clip, step
    device = next(model.parameters()).device
    data = batchify(stream, batch_size).to(device)  # (B, L)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    state, i, losses = None, 0, []
    for _ in range(steps):
        if i >= data.size(1) - 1:
            state, i = None, 0
        inputs, targets = get_chunk(data, i, bptt)
        logits, state = model(inputs, detach_state(state))
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
        i += bptt
    return losses
    # END SOLUTION


# %% [markdown]
# ## Q5. Vanishing and exploding gradients
#
# Why do plain RNNs forget? The gradient of a loss at the last step $T$ with respect to an early
# state $h_t$ is a product of $T - t$ Jacobians
# $\partial h_{k+1} / \partial h_k = \mathrm{diag}(1 - h_{k+1}^2)\, W_{hh}$. When the largest singular
# value of $W_{hh}$ is below 1 (times the tanh slope), it shrinks geometrically; above 1 it can
# grow geometrically. The LSTM's additive cell update gives the gradient a path that is multiplied
# only by the forget gates.
#
# `hidden_grad_norms(cell, x, state=None)` runs `cell` (an `RNNCell`, `LSTMCell` or `GRUCell`)
# over `x` `(B, T, d)` from `state` (zeros when `None`; a pair of zero tensors for an
# `LSTMCell`), takes the loss $L = \sum h_T$ (the sum of every entry of the **last** hidden state
# $h_T$; for the LSTM, $h$ and not $c$), and returns a float tensor of shape `(T,)` whose entry
# `t` is the norm $\|\partial L / \partial h_{t+1}\|$ over the whole `(B, H)` gradient of the
# state after step `t + 1` (so the last entry is $\sqrt{B H}$). Hint: keep the list of states
# and use `torch.autograd.grad(L, states)`; gradients with respect to the stacked outputs of a
# layer are not the same thing (why?).

# %% tags=["graded"]
import torch


def hidden_grad_norms(cell, x, state=None):
    """(T,) tensor: entry t is the norm of d(sum of h_T) / d h_{t+1} over (B, H), for cell run over x (B, T, d)."""
    # BEGIN SOLUTION: hidden_grad_norms: run the cell step by step keeping every h, L = last h summed, torch.autograd.grad(L, hs), one norm per step
    with torch.enable_grad():
        if state is None:
            h = x.new_zeros(x.size(0), cell.hidden_size)
            state = (h, h) if isinstance(cell, LSTMCell) else h
        hs = []
        for t in range(x.size(1)):
            state = cell(x[:, t], state)
            hs.append(state[0] if isinstance(state, tuple) else state)
        grads = torch.autograd.grad(hs[-1].sum(), hs)
    return torch.stack([g.norm() for g in grads])
    # END SOLUTION


# %% [markdown]
# **The experiment (not graded).** A tanh RNN with $W_{hh}$ scaled to spectral norms 0.5, 1 and 3,
# and an LSTM, over 60 random steps: the norm of the gradient reaching each earlier step, on a log
# scale.

# %% tags=["figure"]
import matplotlib.pyplot as plt

torch.manual_seed(0)
T, d, H = 60, 8, 32
x = torch.randn(4, T, d)
fig, ax = plt.subplots(figsize=(7, 4))
for scale in (0.5, 1.0, 3.0):
    cell = RNNCell(d, H)
    with torch.no_grad():
        W = torch.randn(H, H)
        cell.weight_hh.copy_(W / torch.linalg.matrix_norm(W, ord=2) * scale)
    ax.semilogy(hidden_grad_norms(cell, x).detach(), label=f"tanh RNN, |W_hh| = {scale}")
ax.semilogy(hidden_grad_norms(LSTMCell(d, H), x).detach(), label="LSTM")
ax.set(xlabel="step t", ylabel="norm of dL/dh_t (L at the last step)")
ax.legend()
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 1: vanishing gradients at small and large $W_{hh}$
#
# In the plot, how many steps back does the gradient of the tanh RNN with $\|W_{hh}\| = 0.5$ fall
# below $10^{-6}$ of its value at the last step, and with $\|W_{hh}\| = 1$? Why does a larger
# $\|W_{hh}\|$ not simply fix vanishing gradients (look at the curve for 3, and think about what tanh
# does to large pre-activations), and what does gradient clipping do, and not do, about it?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* With $\|W_{hh}\| = 0.5$ the gradient falls below $10^{-6}$ of its last value about
# 10 steps back, with $\|W_{hh}\| = 1$ about 17 steps back: each step multiplies it by
# $\mathrm{diag}(\tanh')\,W_{hh}^\top$, whose norm is at most $\|W_{hh}\|$ and less where tanh
# saturates, so it shrinks geometrically. With $\|W_{hh}\| = 3$ the curve stays near its last
# value: large pre-activations drive most units into saturation, where $\tanh' \approx 0$, and the
# few unsaturated directions are stretched by up to 3; the two effects roughly balance, so the
# gradient neither vanishes nor grows much here. But it flows through a few unsaturated units only,
# and a saturated state hardly responds to its input, so the network learns slowly and its state
# carries little about the past. A larger $W_{hh}$ trades vanishing for saturation (and, where
# fewer units saturate, for exploding gradients), not for useful long-range gradients. Clipping rescales the whole gradient when its
# norm exceeds a threshold: it stops an exploding gradient from wrecking an update, but it only ever
# shrinks, so it cannot bring back a gradient that has vanished. That needs another architecture
# (the LSTM's additive cell path, with forget gates near 1).

# %% [markdown]
# ## Q6. Decoding
#
# A language model gives a distribution over the next token; decoding turns it into a sequence.
# All three functions take a `model` with `forward(tokens (1, T), state) -> (logits (1, T, V), state)`,
# a `prefix` (a non-empty list of token ids to condition on), `max_len` (the most tokens to
# generate; 0 gives `[]`) and `eos_id`; they return only the **generated** tokens, and generation
# stops right after `eos_id` is generated (it is included). Feed the prefix once, then one token at
# a time with the state (do not re-run the whole sequence at every step); the state is whatever the
# model returned (a tensor, or a tuple `(h, c)` for an LSTM): pass it on as it is. The model may sit on a
# GPU: make every tensor you feed it on its device, `torch.tensor([prefix], device=model_device(model))`
# (`model_device` is given below). Logits can be large (thousands): use `torch.softmax` and
# `torch.log_softmax`, never `exp` by hand, which overflows.
#
# - **Greedy**: the most probable token at every step (ties: the lowest id, as `argmax` does).
# - **Sampling with temperature** $\tau$: sample from $\mathrm{softmax}(z / \tau)$. Create **one**
#   `torch.Generator` seeded with `seed` per call and draw every token from it
#   (`torch.multinomial(probs, 1, generator=g)` with `probs` on the CPU, the generator's device), so
#   that a seed gives one reproducible sequence. A tiny temperature (0.01) must still work.
# - **Beam search** of width $k$. A hypothesis is a list of generated tokens and its log-probability
#   (natural log, the sum over its tokens). Start with the empty hypothesis. At each of at most
#   `max_len` steps, extend every *open* hypothesis by every token, keep the $k$ extensions with the
#   highest log-probability; those that end in `eos_id` are *finished* and leave the beam, the
#   others stay open. Stop when no hypothesis is open; open hypotheses after `max_len` steps count as
#   finished. Return the finished hypotheses as `(tokens, score)` pairs sorted by score, best first,
#   at most $k$ of them, with the **length-normalized** score
#   $\mathrm{score} = \log p(\text{tokens} \mid \text{prefix}) / |\text{tokens}|^{\alpha}$
#   ($\alpha = 0$: plain log-probability, which favours short outputs; $\alpha = 1$: per token); `max_len=0` returns `[([], 0.0)]`.
#
# `TableModel` below is a tiny language model given by a table of logits indexed by the previous
# two tokens; the grader tests your decoders on such models (so a bug in your `RNNLM` does not
# cost Q6).

# %% tags=["graded"]
import torch
from torch import nn


class TableModel(nn.Module):
    """Given, for testing decoders: the logits of the token after (a, b) are table[a, b], a (V, V, V) table.

    The state is the last token fed (B,); without a state the first token counts as its own predecessor.
    """

    def __init__(self, table):
        super().__init__()
        self.register_buffer("table", torch.as_tensor(table))

    def forward(self, tokens, state=None):
        previous = tokens[:, :1] if state is None else state[:, None]  # (B, 1)
        previous = torch.cat([previous, tokens[:, :-1]], dim=1)  # (B, T)
        return self.table[previous, tokens], tokens[:, -1]


def model_device(model):
    """Given: where the model's tensors live (its first parameter or buffer), so the tokens fed to it go there too."""
    for tensor in model.parameters():
        return tensor.device
    for tensor in model.buffers():
        return tensor.device
    return torch.device("cpu")


def greedy_decode(model, prefix, max_len, eos_id):
    """The most probable token at each step, at most max_len tokens, stopping after eos_id; a list of ints."""
    # BEGIN SOLUTION: greedy_decode: feed the prefix, then repeatedly take the argmax of the last logits and feed it back with the state
    device = model_device(model)  # a model on a GPU needs its tokens there
    with torch.no_grad():
        logits, state = model(torch.tensor([prefix], device=device), None)
        out = []
        for _ in range(max_len):
            token = int(logits[0, -1].argmax())
            out.append(token)
            if token == eos_id:
                break
            logits, state = model(torch.tensor([[token]], device=device), state)
    return out
    # END SOLUTION


def sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):
    """One sequence sampled from softmax(logits / temperature) with one torch.Generator seeded by seed."""
    # BEGIN SOLUTION: sample: one torch.Generator().manual_seed(seed); at each step softmax(logits / temperature) and torch.multinomial with that generator
    generator = torch.Generator().manual_seed(seed)
    device = model_device(model)
    with torch.no_grad():
        logits, state = model(torch.tensor([prefix], device=device), None)
        out = []
        for _ in range(max_len):
            probs = torch.softmax(logits[0, -1].double() / temperature, dim=-1).cpu()  # the generator's device
            token = int(torch.multinomial(probs, 1, generator=generator))
            out.append(token)
            if token == eos_id:
                break
            logits, state = model(torch.tensor([[token]], device=device), state)
    return out
    # END SOLUTION


def beam_search(model, prefix, beam_size, max_len, eos_id, alpha=1.0):
    """Beam search; a list of at most beam_size (tokens, score) pairs, best first, score = logprob / len**alpha."""
    # BEGIN SOLUTION: beam_search: open hypotheses (tokens, logprob, logits, state); extend all, keep the beam_size best by logprob, move those ending in eos to finished
    if max_len == 0:
        return [([], 0.0)]  # the empty hypothesis: nothing generated, log-probability 0
    device = model_device(model)
    with torch.no_grad():
        logits, state = model(torch.tensor([prefix], device=device), None)
        beam = [([], 0.0, logits[0, -1], state)]
        finished = []
        for _ in range(max_len):
            candidates = []
            for tokens, logprob, last, st in beam:
                scores = torch.log_softmax(last.double(), dim=-1)
                for token in range(scores.size(0)):
                    candidates.append((tokens + [token], logprob + float(scores[token]), st))
            candidates.sort(key=lambda c: -c[1])
            beam = []
            for tokens, logprob, st in candidates[:beam_size]:
                if tokens[-1] == eos_id:
                    finished.append((tokens, logprob))
                else:
                    logits, new_state = model(torch.tensor([[tokens[-1]]], device=device), st)
                    beam.append((tokens, logprob, logits[0, -1], new_state))
            if not beam:
                break
        finished += [(tokens, logprob) for tokens, logprob, _, _ in beam]
    scored = [(tokens, logprob / len(tokens) ** alpha) for tokens, logprob in finished]
    scored.sort(key=lambda pair: -pair[1])
    return scored[:beam_size]
    # END SOLUTION


# %% [markdown]
# ## Q7. A character-level LSTM on Shakespeare
#
# No new code: your `RNNLM` with an `LSTMLayer`, trained by your `train_lm`. The grader builds the
# model itself (vocabulary: the 43 characters of the lowercased training plays; `emb_dim=32`,
# `hidden_size=128`), loads its own initial weights into it, calls your `train_lm` with its own
# settings on the training plays, and computes the perplexity of the returned weights on the
# held-out **test** plays with its own forward pass. Full points for doing about as well as the
# staff's code with the same settings (about 20 seconds of one CPU core). Run it yourself below.
#
# **Only training the grader sees earns points.** The initial weights are drawn for your submission
# alone; the grader replays your first two steps from them and checks that the weights `train_lm`
# leaves in the model descend from them through your own steps. Weights trained anywhere else (at
# home, with `nn.LSTM`, pasted into the notebook or loaded from a file), or a model re-created or
# re-initialized inside `train_lm`, earn nothing, however good their perplexity.

# %%
import time

from autograder.data import shakespeare

train_text = shakespeare.text("train").lower()
chars = sorted(set(train_text))
char_id = {ch: i for i, ch in enumerate(chars)}
stream = torch.tensor([char_id[ch] for ch in train_text[:600_000]])
torch.manual_seed(0)
lm = RNNLM(len(chars), 32, 128, layer=LSTMLayer)
start = time.process_time()
losses = train_lm(lm, stream, steps=200, lr=4.0, batch_size=32, bptt=64, clip=0.5)  # the grader runs 400 steps
print(f"{time.process_time() - start:.1f} s CPU, last losses {sum(losses[-50:]) / 50:.3f} nats/char")
plt.plot(losses)
plt.xlabel("step"), plt.ylabel("training loss (nats per character)")
plt.show()

# %% [markdown]
# **Samples** from your trained model (with your Q6 `sample`, at two temperatures):

# %% tags=["figure"]
prompt = [char_id[ch] for ch in "first citizen:\n"]
for temperature in (0.5, 1.0):
    ids = sample(lm, prompt, 200, eos_id=-1, temperature=temperature, seed=1)
    print(f"--- temperature {temperature}\n" + "".join(chars[i] for i in ids))

# %% [markdown] tags=["written"]
# ### Written question 2: temperature
#
# Compare your two samples. What changes from temperature 0.5 to 1.0 (spelling, words that exist,
# repetition, line structure), and why, in terms of what dividing the logits by the temperature does
# to the distribution? What would temperature 0 give, and what would a very high one give?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* Dividing the logits by $T$ before the softmax sharpens the distribution for
# $T < 1$ and flattens it for $T > 1$. At 0.5 the model keeps to its likeliest characters: mostly
# real, frequent words, speaker names and line breaks in the right places, but also repetition (the
# same phrases and words again and again). At 1.0 it samples from the distribution it learned:
# more varied text with more invented or misspelt words and odd punctuation, since every unlikely
# character gets its full share. Temperature 0 is greedy decoding (argmax, the same text every time,
# usually stuck in a loop); a very high temperature approaches the uniform distribution over the
# characters, gibberish.

# %% [markdown]
# ## Q8. An encoder–decoder with additive attention
#
# A sequence-to-sequence model reads a source sequence with an **encoder** RNN and writes the target
# with a **decoder** RNN. With **additive attention** (Bahdanau et al., 2015) the decoder looks back
# at every encoder state at every step: with the previous decoder state $s_{i-1}$ as the query,
#
# $$e_{ij} = v^\top \tanh(W_q s_{i-1} + W_k h_j + b), \qquad \alpha_{ij} = \mathrm{softmax}_j(e_{ij}), \qquad c_i = \sum_j \alpha_{ij} h_j ,$$
#
# where padded source positions get no weight (`mask` is `True` at real tokens). In
# `AdditiveAttention`, $W_q$ is `query_proj` (no bias), $W_k$ and $b$ are `key_proj`, and $v$ is
# `score` (no bias).
#
# `Seq2Seq.forward(src, src_mask, tgt_in)`: encode the embedded source with `self.encoder` (an
# `LSTMLayer`), start the decoder from the encoder's final state `(h, c)` (with padding at the end
# of a source, the "final" state is the one after the padding: keep it simple), and at each target
# step $i$: attend with the decoder's current `h`, run `self.decoder` (an `LSTMCell`) on the
# concatenation `[embedding of tgt_in[:, i]; context]`, and compute the logits
# `self.out([new h; context])`. It returns the logits `(B, T, V)` and the attention weights
# `(B, T, S)`.
#
# The task is to **reverse a string of digits** (`0 3 7` → `7 3 0`). Ids: `0` padding, `1` start
# of target (`<s>`), `2` end (`</s>`), digits `d` → `d + 3`. `train_seq2seq` trains on padded
# pairs `src` `(N, S)` and `tgt` `(N, T)` (each target row: the reversed digits, then `</s>`, then
# padding): decoder inputs `[<s>] + tgt[:, :-1]`, the mean cross-entropy over non-padding targets,
# `torch.optim.Adam(model.parameters(), lr=lr)`, step `k` on rows `k*batch_size % N` up to that plus
# `batch_size` (the last batch of a pass is shorter when N is not a multiple of batch_size; no
# shuffling: the grader's data is already random), clipping with your `clip_grad_norm` at `clip`; it
# returns the losses as Python floats, and moves the data to the model's device. `greedy_translate`
# decodes a batch greedily (`max_len=0`: empty rows), `src` moved to the model's device first
# (callers keep data on the CPU).
# As in Q7, `train_seq2seq` trains the model it is given, in place, from the weights the grader
# loaded into it (drawn for your submission alone): weights from anywhere else earn nothing.

# %% tags=["graded"]
import torch
import torch.nn.functional as F
from torch import nn

PAD, BOS, EOS = 0, 1, 2


class AdditiveAttention(nn.Module):
    """Bahdanau attention: score_j = v . tanh(W_q query + W_k key_j + b)."""

    def __init__(self, query_size, key_size, attn_size):
        super().__init__()
        self.query_proj = nn.Linear(query_size, attn_size, bias=False)
        self.key_proj = nn.Linear(key_size, attn_size)
        self.score = nn.Linear(attn_size, 1, bias=False)

    def forward(self, query, keys, mask=None):
        """query (B, Hq), keys (B, S, Hk), mask (B, S) bool or None -> context (B, Hk), weights (B, S)."""
        # BEGIN SOLUTION: AdditiveAttention.forward: scores (B, S) from tanh of projected query (broadcast over S) plus projected keys; mask, softmax over S, weighted sum of keys
        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze(-1)  # (B, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, S)
        context = torch.einsum("bs,bsh->bh", weights, keys)  # (B, Hk)
        return context, weights
        # END SOLUTION


class Seq2Seq(nn.Module):
    """LSTM encoder, LSTM decoder with additive attention over the encoder states."""

    def __init__(self, vocab_size, emb_dim, hidden_size, attn_size):
        super().__init__()
        self.src_embedding = nn.Embedding(vocab_size, emb_dim)
        self.tgt_embedding = nn.Embedding(vocab_size, emb_dim)
        self.encoder = LSTMLayer(emb_dim, hidden_size)
        self.attention = AdditiveAttention(hidden_size, hidden_size, attn_size)
        self.decoder = LSTMCell(emb_dim + hidden_size, hidden_size)
        self.out = nn.Linear(2 * hidden_size, vocab_size)

    def encode(self, src):
        """src (B, S) -> encoder states (B, S, H) and the decoder's initial state (h, c)."""
        # BEGIN SOLUTION: Seq2Seq.encode: embed the source and run the encoder from zeros
        return self.encoder(self.src_embedding(src))
        # END SOLUTION

    def decode_step(self, token, state, enc, src_mask):
        """token (B,), state (h, c), enc (B, S, H) -> logits (B, V), new state, attention weights (B, S)."""
        # BEGIN SOLUTION: Seq2Seq.decode_step: attend with h, decoder cell on [embedding; context], logits from [new h; context]
        context, weights = self.attention(state[0], enc, src_mask)  # (B, H), (B, S)
        state = self.decoder(torch.cat([self.tgt_embedding(token), context], dim=-1), state)
        return self.out(torch.cat([state[0], context], dim=-1)), state, weights
        # END SOLUTION

    def forward(self, src, src_mask, tgt_in):
        """src (B, S), src_mask (B, S) bool, tgt_in (B, T) -> logits (B, T, V), attention weights (B, T, S)."""
        # BEGIN SOLUTION: Seq2Seq.forward: encode, then decode_step over the target positions with teacher forcing
        enc, state = self.encode(src)
        logits, weights = [], []
        for i in range(tgt_in.size(1)):
            step_logits, state, w = self.decode_step(tgt_in[:, i], state, enc, src_mask)
            logits.append(step_logits)
            weights.append(w)
        return torch.stack(logits, dim=1), torch.stack(weights, dim=1)
        # END SOLUTION


def train_seq2seq(model, src, tgt, *, steps, lr, batch_size, clip):
    """Adam on batches of (src (N, S), tgt (N, T)) in order, teacher forcing, loss over non-pad targets; list of losses."""
    # BEGIN SOLUTION: train_seq2seq: step k uses rows k*batch_size % N ...; decoder inputs [BOS] + tgt[:, :-1]; masked mean cross-entropy; Adam; clip_grad_norm
    device = next(model.parameters()).device
    src, tgt = src.to(device), tgt.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for k in range(steps):
        start = k * batch_size % src.size(0)
        s, y = src[start:start + batch_size], tgt[start:start + batch_size]
        y_in = torch.cat([torch.full_like(y[:, :1], BOS), y[:, :-1]], dim=1)
        logits, _ = model(s, s != PAD, y_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses
    # END SOLUTION


def greedy_translate(model, src, max_len):
    """src (B, S) padded with PAD -> a list of B lists of ids: greedy outputs, </s> and what follows dropped."""
    # BEGIN SOLUTION: greedy_translate: encode, start every row with BOS, feed back the argmax, cut each row at its first EOS
    with torch.no_grad():
        src = src.to(next(model.parameters()).device)
        enc, state = model.encode(src)
        token = torch.full_like(src[:, 0], BOS)
        rows = []
        for _ in range(max_len):
            logits, state, _ = model.decode_step(token, state, enc, src != PAD)
            token = logits.argmax(dim=-1)
            rows.append(token)
        out = torch.stack(rows, dim=1).tolist() if rows else [[] for _ in range(src.size(0))]  # max_len may be 0
    return [row[:row.index(EOS)] if EOS in row else row for row in out]
    # END SOLUTION


# %% [markdown]
# **Try it (not graded):** train on 9,600 random digit strings of length 3 to 8, translate fresh
# ones, and look at where the decoder attends: for reversal, the weights should form an
# anti-diagonal.

# %% tags=["figure"]
def digit_pairs(n, generator):
    lengths = torch.randint(3, 9, (n,), generator=generator)
    src = torch.zeros(n, 8, dtype=torch.long)
    tgt = torch.zeros(n, 9, dtype=torch.long)
    for r, length in enumerate(lengths.tolist()):
        digits = torch.randint(0, 10, (length,), generator=generator) + 3
        src[r, :length] = digits
        tgt[r, :length] = digits.flip(0)
        tgt[r, length] = EOS
    return src, tgt


g = torch.Generator().manual_seed(0)
src, tgt = digit_pairs(9600, g)
torch.manual_seed(0)
s2s = Seq2Seq(13, 16, 32, 24)
losses = train_seq2seq(s2s, src, tgt, steps=300, lr=0.01, batch_size=32, clip=1.0)
test_src, test_tgt = digit_pairs(500, g)
predicted = greedy_translate(s2s, test_src, 9)
expected = [row[:row.index(EOS)] for row in test_tgt.tolist()]
print("exact match:", sum(p == e for p, e in zip(predicted, expected)) / len(expected))
with torch.no_grad():
    one = test_src[:1]
    _, weights = s2s(one, one != PAD, torch.tensor([[BOS] + predicted[0]]))
plt.imshow(weights[0], cmap="viridis")
plt.xlabel("source position"), plt.ylabel("target position")
plt.show()

# %% [markdown] tags=["written"]
# ### Written question 3: where the decoder looks
#
# Describe your attention map for one reversed string. Why is its bright path an anti-diagonal, what
# does the last row (the step that writes the end token) attend to, and how would the map look for
# copying instead of reversing? What does attention give the decoder that the encoder's final state
# alone would not?

# %% [markdown] tags=["answer", "starter"]
# *Your answer:*

# %% [markdown] tags=["answer", "solution"]
# *Staff answer.* Reversal writes the last source digit first: target position $i$ copies source
# position $L - 1 - i$ for a string of length $L$, so each row puts its weight on that one source
# position and the bright cells run from the top right to the bottom left. The last row, which writes
# the end token, has no digit to copy; its weight is spread, often on the first source positions or
# on the end of the source, whatever the model uses to tell that the string is done (padded positions
# get none, by the mask). For copying the path would be the main diagonal. Without attention the
# decoder would have to recover every digit from one fixed-size vector, the encoder's last state,
# which works for short strings and degrades with length; attention lets each step read the one
# encoder state it needs directly.

# %% [markdown]
# ## Done?
#
# Save the notebook, run the public checks one last time, then make the PDF of your written
# answers with `lmgrade export rnn_lm.ipynb` and upload it to the written assignment. Submit
# `rnn_lm.ipynb`.

# %%
from autograder import check_notebook
check_notebook(assignment="rnn_lm")
