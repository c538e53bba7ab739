"""Hidden checks for `rnn_lm`. Never shipped to students.

Recurrent numerics are compared with PyTorch's own `nn.RNN` / `nn.LSTM` / `nn.GRU` holding the same
weights (loaded by parameter name), in float64 here, against the student's module run in float32
and float64; dims are distinct (B != T != d != H). Training functions are checked by exact steps
against the reference run here on the same weights and data, before any threshold. Later questions
are graded on grader-made pieces where they are about something else: Q4 trains the given
`ToyRecurrentLM`, Q6 decodes the given `TableModel` whose table the grader draws and whose sequence
probabilities it computes itself in numpy. Held-out text and fresh evaluation examples never cross
to the worker, and the grader decodes Q8's fresh sources itself.

Only work the grader saw earns points: Q7 and Q8 train from initial weights drawn from the grader's
secret for this submission (`Context.secret_state`); two exact steps from them must equal the
reference's, and every matrix of the trained weights must keep enough of the trace of
its start that the reference's own run keeps (`assert_descends`), so weights trained elsewhere earn
nothing.
"""
import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checking import chi_square, properties
from autograder.checking.checks import check
from autograder.checking.compare import (as_array, assert_close, assert_dtype, assert_equal, assert_shape, explain_library_error,
                                library_advice, parts)
from autograder.checking.perplexity import judge_trained_perplexity
from autograder.checking.provenance import assert_descends, start_profile
from autograder.checking.purity import call_pure, call_twice
from autograder.checking.reference_results import reference_result
from autograder.checking.remote import StudentError
from autograder.checking.training import assert_same_weights, checked_state, float_list, one_thread, spelled
from autograder.checking.torch_checks import (MODULE_TOLERANCES, assert_module_close, assert_param_grads, gradcheck,
                                              name_of, output, randn, reference_module, student_module)
from autograder.errors import CheckFailed

F32, F64 = torch.float32, torch.float64
DTYPES = (F32, F64)
GATES = {"rnn": 1, "lstm": 4, "gru": 3}
BUILTIN = {"rnn": nn.RNN, "lstm": nn.LSTM, "gru": nn.GRU}
BUILTIN_CELL = {"rnn": nn.RNNCell, "lstm": nn.LSTMCell, "gru": nn.GRUCell}
CELL = {"rnn": "RNNCell", "lstm": "LSTMCell", "gru": "GRUCell"}
LAYER = {"rnn": "RNNLayer", "lstm": "LSTMLayer", "gru": "GRULayer"}

# Q7: the graded training run (about 16 s of one CPU core for the reference). The threshold is the
# reference's test perplexity with the same settings and initial weights, times 1 + PPL_MARGIN
# (bench/rnn_lm_thresholds.py measures the margin over seeds and correct alternatives).
Q7_MODEL = dict(emb_dim=32, hidden_size=128)
Q7_SETTINGS = dict(steps=400, lr=4.0, batch_size=32, bptt=64, clip=0.5)
Q7_INIT_SEED = 7  # the threshold's run only: a submission trains from its own secret start
PPL_MARGIN = 0.05  # correct runs over 9 starts: ratio 0.980-1.006, sd 0.009; a fitted normal exceeds 1.05 at 2e-10
# provenance (bench/rnn_lm_thresholds.py; measured spread in docs/assignments/rnn_lm.md): the matrices
# must keep this share of the correlation with their start that the reference's threshold run keeps,
# each at least START_LEAST and START_MEAN on average (correct runs from other starts keep over 0.9 of
# it on average, weights from any other start about 0)
START_LEAST, START_MEAN = 0.4, 0.7
FIRST_STEPS = 2  # exact steps replayed from the secret start (float64) before the whole run
Q8_INIT_SEED = 11  # the Q8 reference run's start and data, for its start profile
# Q8: the toy transduction task (reverse a digit string) and its training settings (about 8 s).
PAD, BOS, EOS, DIGIT0 = 0, 1, 2, 3
S2S_VOCAB, S2S_MAX = 13, 8
Q8_MODEL = dict(emb_dim=16, hidden_size=32, attn_size=24)
Q8_SETTINGS = dict(steps=400, lr=0.01, batch_size=32, clip=1.0)
Q8_EVAL = 500
# From the spread of correct runs (bench/rnn_lm_thresholds.py spread q8; docs/assignments/rnn_lm.md): over 40
# starts the exact match of correct code has a long lower tail (mean 0.980, min 0.880), so 0.90 failed about 1.3%
# of correct submissions; at 0.60 a normal fitted to sqrt(1 - accuracy) puts the false-fail rate near 1e-8.
Q8_MIN_ACCURACY = 0.60


# ---- modules with the grader's weights --------------------------------------------------------
def cell_weights(t, kind: str, d: int, H: int, prefix: str = "") -> dict:
    """float32 weights named as in nn.RNNCell / nn.LSTMCell / nn.GRUCell, scaled like their init."""
    G = GATES[kind] * H
    return {f"{prefix}weight_ih": randn(t, G, d, dtype=F32, scale=H ** -0.5),
            f"{prefix}weight_hh": randn(t, G, H, dtype=F32, scale=H ** -0.5),
            f"{prefix}bias_ih": randn(t, G, dtype=F32, scale=0.3),
            f"{prefix}bias_hh": randn(t, G, dtype=F32, scale=0.3)}


def builtin_layer(kind: str, weights: dict, d: int, H: int, prefix: str = "") -> nn.Module:
    """PyTorch's nn.RNN / nn.LSTM / nn.GRU (float64, batch first) holding the same float32 weights."""
    names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
    return reference_module(BUILTIN[kind](d, H, batch_first=True), {f"{n}_l0": weights[prefix + n] for n in names}, F64)


def run_builtin(kind: str, weights: dict, x, state, prefix: str = ""):
    """(outputs (B, T, H), final state) of the built-in layer in float64; state in the student's format."""
    d, H = x.shape[-1], weights[prefix + "weight_hh"].shape[1]
    module = builtin_layer(kind, weights, d, H, prefix)
    if state is None:
        hx = None
    elif kind == "lstm":
        hx = (state[0].double()[None], state[1].double()[None])
    else:
        hx = state.double()[None]
    with torch.no_grad():
        out, final = module(x.double(), hx)
    final = (final[0][0], final[1][0]) if kind == "lstm" else final[0]
    return out, final


def assert_state_close(got, expected, what: str, dtype, kind: str) -> None:
    if kind == "lstm":
        got = parts(got, 2, what + " state (h, c)")
        for g, e, name in zip(got, expected, ("h", "c")):
            assert_module_close(output(g, None, what), e, f"{what} final {name}", dtype)
    else:
        assert_module_close(output(got, None, what), expected, what + " final state", dtype)


D = properties.OnDevice  # a call for the matrix's `device` property (fail-only; alone: properties.run_device)
IN_FLOAT64 = dict(follows_dtype=False, dtypes=("float64",))  # a model passed in sets the dtype: decoders, trainings


def random_state(t, kind: str, B: int, H: int, dtype):
    if kind == "lstm":
        return (randn(t, B, H, dtype=dtype, scale=0.5), randn(t, B, H, dtype=dtype, scale=0.5))
    return randn(t, B, H, dtype=dtype, scale=0.5)


# ---- Q1 and Q2: cells and layers against the built-ins -----------------------------------------
def cell_vs_builtin(t, kind: str) -> None:
    name = CELL[kind]
    for B, d, H in ((3, 5, 4), (1, 2, 7)):
        weights = cell_weights(t, kind, d, H)
        for dtype in DTYPES:
            cell = student_module(t, getattr(t.student, name), (d, H), weights, dtype)
            x, state = randn(t, B, d, dtype=dtype), random_state(t, kind, B, H, dtype)
            what = f"{name}({d}, {H})(x ({B}, {d}), state, {name_of(dtype)})"
            got = call_pure(cell, x, state, what=what)
            _, expected = run_builtin(kind, weights, x[:, None], state)
            assert_state_close(got, expected, what, dtype, kind)
            for value in (parts(got, 2, what) if kind == "lstm" else [got]):
                assert_shape(value, (B, H), what)
                assert_dtype(value, name_of(dtype), what)
    properties.run(t, cell_matrix(t, kind))


def cell_matrix(t, kind: str) -> properties.Graded:
    """A cell's samples for the property matrix: saturated gates, forward and backward.

    Pre-activations of hundreds in float32 (x of about 100) and thousands in float64 (about 1000), both
    signs: tanh written as 1 - 2/(exp(2z) + 1) or sigmoid as 1/(1 + exp(-z)) is right forward there and
    NaN backward; (exp(2z) - 1)/(exp(2z) + 1) is NaN forward. Device: a batch at ordinary scale."""
    name, (B, d, H) = CELL[kind], (2, 3, 4)
    weights = cell_weights(t, kind, d, H)
    reference = reference_module(BUILTIN_CELL[kind](d, H), weights, F64)
    samples = []
    for dtype, scale in ((F32, 100.0), (F64, 1000.0)):
        cell = student_module(t, getattr(t.student, name), (d, H), weights, dtype)
        x, state = randn(t, B, d, dtype=dtype, scale=scale), random_state(t, kind, B, H, dtype)
        for sign in (1, -1):
            label = f"x ({B}, {d}) of about {sign * scale:+g} (saturated gates), a state, {name_of(dtype)}"
            for index in ((0, 1) if kind == "lstm" else (None,)):
                samples.append(properties.Sample(label + ("" if index is None else f", output {'hc'[index]}"),
                                                 (sign * x, state), wrt=(0,), output_index=index, call=cell))
    probe = D(f"x ({B}, {d}), a state", (randn(t, B, d), random_state(t, kind, B, H, F64)), call=cell)
    return properties.Graded(f"{name}({d}, {H})", None, reference, {"extremes": samples, "device": [probe]})


def layer_vs_builtin(t, kind: str) -> None:
    name = LAYER[kind]
    for B, T, d, H in ((3, 7, 5, 4), (1, 1, 3, 6), (2, 4, 1, 3)):
        weights = cell_weights(t, kind, d, H, "cell.")
        for dtype in DTYPES:
            layer = student_module(t, getattr(t.student, name), (d, H), weights, dtype)
            x = randn(t, B, T, d, dtype=dtype)
            for label, state in (("no initial state", None), ("an initial state", random_state(t, kind, B, H, dtype))):
                what = f"{name}({d}, {H})(x ({B}, {T}, {d}), {label}, {name_of(dtype)})"
                args = (x,) if state is None else (x, state)
                got = call_pure(layer, *args, what=what)
                outputs, final = parts(got, 2, what)
                expected_out, expected_final = run_builtin(kind, weights, x, state, "cell.")
                assert_shape(output(outputs, None, what), (B, T, H), what + " outputs")
                assert_dtype(outputs, name_of(dtype), what + " outputs")
                assert_module_close(outputs, expected_out, what + " outputs", dtype)
                assert_state_close(final, expected_final, what, dtype, kind)
    properties.run_device(t, f"{name}({d}, {H})", student_module(t, getattr(t.student, name), (d, H), weights, F32),
                          f"x (2, 3, {d})", (randn(t, 2, 3, d, dtype=F32),))


def layer_gradients(t, kind: str) -> None:
    B, T, d, H = 2, 4, 3, 5
    weights = cell_weights(t, kind, d, H, "cell.")
    layer = student_module(t, getattr(t.student, LAYER[kind]), (d, H), weights, F64)
    x, state = randn(t, B, T, d), random_state(t, kind, B, H, F64)
    what = f"{LAYER[kind]}({d}, {H}) on x ({B}, {T}, {d}) with an initial state"
    wrt = [0] if kind == "lstm" else [0, 1]  # an LSTM's state is a pair (h, c)
    gradcheck(layer, [x, state], wrt, what + f", outputs w.r.t. x{'' if kind == 'lstm' else ' and h0'}", output_index=0)
    ref = reference_module(getattr(t.ref, LAYER[kind])(d, H), weights, F64)
    # the matrix: the plain call, and saturated gates through the whole loop (a layer may inline its cell's formula)
    S, loud32 = properties.Sample, student_module(t, getattr(t.student, LAYER[kind]), (d, H), weights, F32)
    extremes = [S(f"x ({B}, {T}, {d}) of about {scale:+g} (saturated gates), a state, {name_of(dtype)}",
                  (x.to(dtype) * scale, tuple(s.to(dtype) for s in state) if kind == "lstm" else state.to(dtype)),
                  wrt=(0,), output_index=0, call=call) for dtype, scale, call in ((F64, 1000.0, layer), (F32, -100.0, loud32))]
    try:  # blame the right function: through a cell that fails at saturation, so does the layer (the cell's check)
        properties.run(t, cell_matrix(t, kind), ("extremes",))
    except CheckFailed:
        extremes = []
        t.note(f"{LAYER[kind]} at saturation was not tried: your {CELL[kind]} fails there (its own check).")
    properties.run(t, properties.Graded(f"{LAYER[kind]}({d}, {H})", layer, ref, {
        "inputs": [S(f"x ({B}, {T}, {d}), a state, float64", (x, state))], "extremes": extremes}))
    assert_param_grads(layer, ref, [x, state], what, rng=t.rng, output_index=0)
    cell_w = {k.removeprefix("cell."): v for k, v in weights.items()}
    cell = student_module(t, getattr(t.student, CELL[kind]), (d, H), cell_w, F64)
    xs, hs = randn(t, B, d), random_state(t, kind, B, H, F64)
    if kind == "lstm":
        for index, part in ((0, "h"), (1, "c")):
            gradcheck(cell, [xs, hs], [0], f"LSTMCell({d}, {H}), {part} w.r.t. x", output_index=index)
    else:
        gradcheck(cell, [xs, hs], [0, 1], f"{CELL[kind]}({d}, {H}) w.r.t. x and h")


RNN_USES = ("RNNCell", "RNNLayer")
LSTM_USES = ("LSTMCell", "LSTMLayer")
GRU_USES = ("GRUCell", "GRULayer")


@check(1, 1.5, "RNNCell against nn.RNN holding the same weights (float32 and float64, batch of one)", uses=RNN_USES,
       hint="h' = tanh(x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh): both biases, both transposes.")
def rnn_cell_hidden(t):
    cell_vs_builtin(t, "rnn")


@check(1, 2, "RNNLayer against nn.RNN: every state and the last, with and without h0, T = 1", uses=RNN_USES,
       hint="start from h0 (zeros of shape (B, H) when None), feed x[:, t] and the previous state at each step.")
def rnn_layer_hidden(t):
    layer_vs_builtin(t, "rnn")


@check(1, 1.5, "RNNLayer and RNNCell gradients (gradcheck and every parameter, float64)", uses=RNN_USES)
def rnn_gradients(t):
    layer_gradients(t, "rnn")


@check(2, 1.5, "LSTMCell against nn.LSTM holding the same weights (float32 and float64, batch of one)",
       uses=LSTM_USES, hint="gates in the order i, f, g, o (chunk(4) of the (B, 4H) pre-activations); sigmoid for "
                            "i, f, o and tanh for g; c' = f*c + i*g, h' = o*tanh(c').")
def lstm_cell_hidden(t):
    cell_vs_builtin(t, "lstm")


@check(2, 2, "LSTMLayer against nn.LSTM: outputs and (h_T, c_T), with and without a state, T = 1", uses=LSTM_USES)
def lstm_layer_hidden(t):
    layer_vs_builtin(t, "lstm")


@check(2, 1.5, "LSTMLayer and LSTMCell gradients (gradcheck and every parameter, float64)", uses=LSTM_USES)
def lstm_gradients(t):
    layer_gradients(t, "lstm")


@check(2, 1, "extra credit: GRUCell and GRULayer against nn.GRU (float32 and float64)", extra=True, uses=GRU_USES,
       hint="order r, z, n; n = tanh(x_n + r * (h @ W_hn.T + b_hn)); h' = (1 - z) * n + z * h.")
def gru_hidden(t):
    cell_vs_builtin(t, "gru")
    layer_vs_builtin(t, "gru")


@check(2, 1, "extra credit: GRU gradients (gradcheck and every parameter, float64)", extra=True, uses=GRU_USES)
def gru_gradients(t):
    layer_gradients(t, "gru")


# ---- Q3: the language model -------------------------------------------------------------------
LM_USES = ("RNNLM",)
LM_NEEDS = RNN_USES + LSTM_USES


def lm_weights(t, kind: str, V: int, E: int, H: int, tied: bool = False) -> dict:
    weights = {"embedding.weight": randn(t, V, E, dtype=F32)}
    weights |= cell_weights(t, kind, E, H, "rnn.cell.")
    weights["proj.weight"] = weights["embedding.weight"] if tied else randn(t, V, H, dtype=F32, scale=H ** -0.5)
    weights["proj.bias"] = randn(t, V, dtype=F32, scale=0.1)
    return weights


def lm_logits(kind: str, weights: dict, tokens, state=None):
    """The grader's RNN LM in float64: embedding, the built-in layer, projection."""
    emb = weights["embedding.weight"].double()[tokens]  # (B, T, E)
    out, final = run_builtin(kind, weights, emb, state, "rnn.cell.")
    return out @ weights["proj.weight"].double().T + weights["proj.bias"].double(), final


def student_lm(t, kind: str, V: int, E: int, H: int, weights: dict, dtype, tied: bool = False):
    layer = getattr(t.student, LAYER[kind]).get()
    kwargs = {"tie_weights": True} if tied else {}
    return student_module(t, t.student.RNNLM, (V, E, H), weights, dtype, layer=layer, **kwargs)


def random_tokens(t, B: int, T: int, V: int) -> torch.Tensor:
    return torch.from_numpy(t.rng.integers(0, V, size=(B, T)))


@check(3, 2, "RNNLM forward with LSTMLayer and RNNLayer against the built-ins (float32 and float64, a state)",
       uses=LM_USES, needs=LM_NEEDS,
       hint="embed the tokens, run self.rnn from the given state, apply self.proj to every output.")
def rnnlm_forward_hidden(t):
    V, E, H = 11, 6, 5
    for kind in ("lstm", "rnn"):
        weights = lm_weights(t, kind, V, E, H)
        for dtype in DTYPES:
            model = student_lm(t, kind, V, E, H, weights, dtype)
            for B, T in ((3, 7), (1, 1)):
                tokens = random_tokens(t, B, T, V)
                for label, state in (("no state", None), ("a state", random_state(t, kind, B, H, dtype))):
                    what = f"RNNLM({V}, {E}, {H}, layer={LAYER[kind]})(tokens ({B}, {T}), {label}, {name_of(dtype)})"
                    got = call_pure(model, *((tokens,) if state is None else (tokens, state)), what=what)
                    logits, final = parts(got, 2, what)
                    expected, expected_final = lm_logits(kind, weights, tokens, state)
                    assert_shape(output(logits, None, what), (B, T, V), what + " logits")
                    assert_module_close(logits, expected, what + " logits", dtype)
                    assert_state_close(final, expected_final, what, dtype, kind)
    name = f"RNNLM({V}, {E}, {H}, layer={LAYER[kind]})"
    properties.run_pure(t, name + " in float64", student_lm(t, kind, V, E, H, weights, F64),
                        lambda tokens: lm_logits(kind, weights, tokens), "tokens (2, 5)", (random_tokens(t, 2, 5, V),))
    properties.run_device(t, name, student_lm(t, kind, V, E, H, weights, F32), "tokens (2, 3)",
                          (random_tokens(t, 2, 3, V),))


@check(3, 1.5, "RNNLM with tie_weights=True: one shared (V, d) matrix, its gradient from both uses",
       uses=LM_USES, needs=LM_NEEDS,
       hint="assign the embedding's Parameter itself: self.proj.weight = self.embedding.weight (not a copy).")
def rnnlm_tied(t):
    V, E = 9, 5
    weights = lm_weights(t, "lstm", V, E, E, tied=True)
    model = student_lm(t, "lstm", V, E, E, weights, F64, tied=True)
    tokens = random_tokens(t, 2, 4, V)
    what = f"RNNLM({V}, {E}, {E}, tie_weights=True)(tokens (2, 4))"
    logits, _ = parts(model(tokens), 2, what)
    assert_module_close(logits, lm_logits("lstm", weights, tokens)[0], what + " logits", F64)
    ref = reference_module(t.ref.RNNLM(V, E, E, layer=t.ref.LSTMLayer, tie_weights=True), weights, F64)
    assert_param_grads(model, ref, [tokens], what, rng=t.rng, output_index=0)
    grads = model.vjp([tokens], [], torch.ones(2, 4, V, dtype=F64), output_index=0).get("param_grads", {})
    if "proj.weight" in grads:
        raise CheckFailed(f"{what}: `proj.weight` is still a parameter of its own; with tied weights it must be the "
                          "embedding's parameter (self.proj.weight = self.embedding.weight).")
    try:
        t.student.RNNLM(V, 4, 6, tie_weights=True)
    except StudentError as exc:
        if "ValueError" not in str(exc):
            raise CheckFailed(f"RNNLM({V}, 4, 6, tie_weights=True) should raise ValueError (emb_dim != hidden_size), "
                              f"got: {str(exc).splitlines()[0]}") from None
    else:
        raise CheckFailed(f"RNNLM({V}, 4, 6, tie_weights=True) should raise ValueError: tied weights need "
                          "emb_dim == hidden_size.")


@check(3, 1, "RNNLM is causal: later tokens never change earlier logits", uses=LM_USES, needs=LM_NEEDS)
def rnnlm_causal(t):
    V, E, H = 10, 4, 6
    model = student_lm(t, "lstm", V, E, H, lm_weights(t, "lstm", V, E, H), F64)
    properties.run(t, properties.Graded(f"RNNLM({V}, {E}, {H})", model, None, {"causal": [properties.Causal(
        "tokens (3, 6)", (random_tokens(t, 3, 6, V),), vocab=V, output_index=0, advice=" Feed the tokens left to "
        "right, each step reading only the state of the ones before it.")]}), ("causal",))


LOUD = 2000.0  # weights scaled so that logits are of thousands: exp(z) overflows even in float64


def toy_weights(t, V: int, d: int) -> dict:
    return {"embedding.weight": randn(t, V, d, dtype=F32, scale=0.5),
            "proj.weight": randn(t, V, d, dtype=F32, scale=d ** -0.5), "proj.bias": randn(t, V, dtype=F32, scale=0.1)}


def toy_reference(t, V: int, d: int, weights: dict, dtype=F64):
    return reference_module(t.ref.ToyRecurrentLM(V, d), weights, dtype)


def lm_loss_truth(ref, tokens, pad_id) -> torch.Tensor:
    """The grader's masked mean cross-entropy in float64 (log-sum-exp: stable at any logit size); with autograd
    on, the reference side of lm_loss's gradients at extreme logits."""
    V = ref.proj.out_features
    logits, _ = ref(tokens[:, :-1])
    targets = tokens[:, 1:].reshape(-1)
    losses = F.cross_entropy(logits.reshape(-1, V), targets, reduction="none")
    keep = torch.ones_like(losses) if pad_id is None else (targets != pad_id).to(losses.dtype)
    return (losses * keep).sum() / keep.sum()


def padded_tokens(t, lengths, V: int, pad: int) -> torch.Tensor:
    T = max(lengths)
    tokens = torch.full((len(lengths), T), pad, dtype=torch.int64)
    for row, n in enumerate(lengths):
        real = [v for v in range(V) if v != pad]
        tokens[row, :n] = torch.as_tensor(t.rng.choice(real, size=n))
    return tokens


@check(3, 2, "lm_loss: teacher forcing, mean over non-pad targets (pad_id None, 0 and 5), T = 2, batch of one",
       uses=("lm_loss",), hint="inputs tokens[:, :-1], targets tokens[:, 1:]; divide by the number of targets that "
                                "are not pad_id, not by B * (T - 1).")
def lm_loss_hidden(t):
    V, d = 8, 5
    weights = toy_weights(t, V, d)
    ref = toy_reference(t, V, d, weights)
    cases = [(None, random_tokens(t, 3, 6, V)), (0, padded_tokens(t, [6, 3, 2, 5], V, 0)),
             (5, padded_tokens(t, [4, 7], V, 5)), (None, random_tokens(t, 1, 2, V)), (0, padded_tokens(t, [2], V, 0))]
    for dtype in DTYPES:
        model = student_module(t, t.student.ToyRecurrentLM, (V, d), weights, dtype)
        for pad_id, tokens in cases:
            what = f"lm_loss(ToyRecurrentLM({V}, {d}), tokens {tuple(tokens.shape)}, pad_id={pad_id}, {name_of(dtype)})"
            got = call_pure(t.student.lm_loss, model, tokens, pad_id=pad_id, what=what)
            if not isinstance(got, torch.Tensor):
                raise CheckFailed(f"{what} should return the loss as a 0-dim tensor, got {type(got).__name__}: "
                                  "a Python number cannot be backpropagated (do not call .item() or float()).")
            assert_shape(got, (), what)
            assert_module_close(got, lm_loss_truth(ref, tokens, pad_id).detach(), what, dtype)
    positional = t.student.lm_loss(model, cases[1][1], 0)
    assert_module_close(positional, call_pure(t.student.lm_loss, model, cases[1][1], pad_id=0), "lm_loss(model, tokens, 0) "
                     "(pad_id given by position)", F64)
    # the matrix: logits of about a thousand (-log(softmax(z)[target]) is -log(0) = inf), the loss and its gradients
    # w.r.t. the parameters in float32 (finite) and float64 (equal to the grader's float64 loss's); inputs and devices
    # on the cases without padding and with pad_id=0
    loud = dict(weights, **{"proj.weight": weights["proj.weight"] * LOUD})
    tokens, loud_ref, toy = padded_tokens(t, [6, 4, 3], V, 0), toy_reference(t, V, d, loud), t.student.ToyRecurrentLM
    label, S, Both = f"ToyRecurrentLM({V}, {d}) with logits of about a thousand, tokens (3, 6) padded, pad_id=0", \
        properties.Sample, properties.Both
    extremes = [S(f"{label}, {name_of(dtype)}", (Both(student_module(t, toy, (V, d), loud, dtype), loud_ref), tokens, 0),
                  tol=MODULE_TOLERANCES[dtype], dtype=dtype) for dtype in DTYPES]
    (_, plain), (_, padded) = cases[:2]
    properties.run(t, properties.Graded("lm_loss", t.student.lm_loss, lm_loss_truth, {"extremes": extremes, "inputs": [
        S(f"ToyRecurrentLM({V}, {d}) in float64, tokens (4, 6) padded, pad_id=0", (Both(model, ref), padded),
          {"pad_id": 0})], "device": [D(f"ToyRecurrentLM({V}, {d}), tokens (3, 6), pad_id=None", (model, plain, None)),
                   D(f"ToyRecurrentLM({V}, {d}), tokens (4, 6) padded, pad_id=0", (model, padded, 0))]}))


# ---- Q4: truncated BPTT -----------------------------------------------------------------------
TBPTT_USES = ("batchify", "get_chunk", "detach_state", "clip_grad_norm", "train_lm")


@check(4, 1, "batchify: rows are contiguous pieces, remainder dropped, int64 (batch of one, N % B == 0)",
       uses=("batchify",), hint="L = N // B; stream[:B * L] viewed as (B, L): row b is stream[b*L:(b+1)*L].")
def batchify_hidden(t):
    for N, B in ((23, 4), (20, 5), (7, 1), (9, 9)):
        stream = torch.from_numpy(t.rng.integers(0, 50, size=N))
        what = f"batchify(stream ({N},), {B})"
        got = call_pure(t.student.batchify, stream, B, what=what)
        L = N // B
        assert_dtype(got, "int64", what)
        assert_equal(output(got, None, what).tolist(), stream[:B * L].view(B, L).tolist(), what)
    properties.run_device(t, "batchify", t.student.batchify, f"stream ({N},), 3", (stream, 3), generator=True)


@check(4, 1, "get_chunk: inputs and targets one apart, a short last chunk, bptt longer than the data",
       uses=("get_chunk",), hint="n = min(bptt, L - 1 - i): the targets data[:, i+1:i+1+n] must exist.")
def get_chunk_hidden(t):
    data = torch.from_numpy(t.rng.integers(0, 90, size=(3, 11)))
    for i, bptt in ((0, 4), (4, 4), (8, 4), (0, 20), (9, 3), (2, 1)):
        what = f"get_chunk(data (3, 11), {i}, {bptt})"
        inputs, targets = parts(call_pure(t.student.get_chunk, data, i, bptt, what=what), 2, what)
        n = min(bptt, 10 - i)
        assert_equal(output(inputs, None, what).tolist(), data[:, i:i + n].tolist(), what + " inputs")
        assert_equal(output(targets, None, what).tolist(), data[:, i + 1:i + 1 + n].tolist(), what + " targets")
    properties.run_device(t, "get_chunk", t.student.get_chunk, "data (3, 11), 2, 4", (data, 2, 4), generator=True)


@check(4, 1, "detach_state: same values and types for a tensor, an (h, c) pair and None; no gradient through it; "
             "the argument left alone",
       uses=("detach_state",))
def detach_state_hidden(t):
    h, c, S = randn(t, 2, 5), randn(t, 2, 5), properties.Sample  # the same values exactly, None for None
    calls = [("h (2, 5)", (h,)), ("(h, c), each (2, 5)", ((h, c),))]
    pair = t.student.detach_state((h, c))
    if not isinstance(pair, tuple):
        raise CheckFailed(f"detach_state((h, c)) should return a tuple (h, c), as the LSTM's state is, got "
                          f"{type(pair).__name__}")
    edges = [S("None", (None,), hint=" The state before the first chunk is None, and stays None.")]
    properties.run(t, properties.Graded("detach_state", t.student.detach_state, t.ref.detach_state, {
        "inputs": [S(label, args, tol=(0, 0)) for label, args in calls], "edges": edges,
        "device": [D(label, args) for label, args in calls]}, generator=S(*calls[0])))
    try:  # fail-only: with the history cut, backward through the call has nothing to reach
        got = t.student.detach_state.vjp([h], [0], torch.ones(2, 5, dtype=F64))
    except StudentError:
        got = None
    grads = got.get("input_grads") if isinstance(got, dict) else None
    if isinstance(grads, list) and grads and isinstance(grads[0], torch.Tensor) and bool(grads[0].abs().sum() > 0):
        raise CheckFailed("detach_state(h): a gradient flows through the returned state into h; it must be cut "
                          "(.detach()), so that no gradient crosses a chunk boundary.")
    # in place? The caller's tensors must keep their history: a tensor that requires grad still does after the call.
    h_leaf, c_leaf, alone = (t.student.put(randn(t, 2, 5).requires_grad_(True), "a state that requires grad")
                             for _ in range(3))
    t.student.detach_state(alone)
    t.student.detach_state((h_leaf, c_leaf))
    for handle, what in ((alone, "detach_state(h)"), (h_leaf, "detach_state((h, c)), its h"),
                         (c_leaf, "detach_state((h, c)), its c")):
        if handle.requires_grad.get() is not True:
            raise CheckFailed(f"{what}: the caller's tensor no longer requires grad after the call: it was detached in "
                              "place (.detach_() or requires_grad_(False)). Return new tensors (state.detach()) and "
                              "leave the argument alone; the docstring says it is not changed.")


def worker_parameters(t, grads: list):
    """Tensors in the worker whose .grad is set (by backward of the grader's gradient), or None for no grad."""
    handles = []
    for g in grads:
        if isinstance(g, tuple):  # ("no grad", shape)
            handles.append(t.student.put(torch.zeros(g[1], dtype=F64).requires_grad_(True), "a parameter"))
            continue
        p = t.student.put(torch.zeros_like(g).requires_grad_(True), "a parameter")
        p.backward(g)
        handles.append(p)
    return handles


def clip_case(t, grads: list, max_norm: float, what: str):
    params = worker_parameters(t, grads)
    norm = t.student.clip_grad_norm(params, max_norm)
    got = [None if isinstance(g, tuple) else p.grad.get() for p, g in zip(params, grads)]
    expected_params = [torch.zeros(g[1] if isinstance(g, tuple) else g.shape, dtype=F64, requires_grad=True)
                       for g in grads]
    for p, g in zip(expected_params, grads):
        p.grad = None if isinstance(g, tuple) else g.clone()
    expected_norm = torch.nn.utils.clip_grad_norm_(expected_params, max_norm)
    if isinstance(norm, bool) or not isinstance(norm, float):
        raise CheckFailed(f"{what} should return the norm before clipping as a Python float, as the docstring says "
                          f"(float(total)), got {type(norm).__name__} {str(norm)[:60]}")
    assert_close(float(norm), float(expected_norm), f"{what}: the returned norm (before clipping)", rtol=1e-9)
    for i, (g, p) in enumerate(zip(got, expected_params)):
        if p.grad is None:
            continue
        assert_close(output(g, None, what), p.grad, f"{what}: gradient {i} after clipping", rtol=1e-9, atol=1e-12)


@check(4, 2, "clip_grad_norm against torch.nn.utils.clip_grad_norm_: global norm, in place, small ones unchanged, "
             "no gradients at all",
       uses=("clip_grad_norm",),
       hint="one norm over all gradients together, sqrt(sum of squares of every entry); scale every gradient by "
            "max_norm / (norm + 1e-6) only when norm > max_norm; skip parameters whose .grad is None (none at all: "
            "return 0.0).")
def clip_hidden(t):
    big = [randn(t, 3, 4, scale=2.0), randn(t, 5, scale=3.0), randn(t, 2, 2, 2)]
    clip_case(t, big, 1.5, "clip_grad_norm(3 parameters with large gradients, 1.5)")
    small = [randn(t, 4, 3, scale=0.01), randn(t, 6, scale=0.01)]
    clip_case(t, small, 10.0, "clip_grad_norm(2 parameters with small gradients, 10.0)")
    clip_case(t, [randn(t, 7, scale=4.0), ("no grad", (3,)), randn(t, 2, 3)], 0.5,
              "clip_grad_norm(a parameter whose .grad is None among others, 0.5)")
    clip_case(t, [randn(t, 1, scale=5.0)], 2.0, "clip_grad_norm(a single 1-element gradient, 2.0)")
    clip_case(t, [("no grad", (4,)), ("no grad", (2, 3))], 1.0,
              "clip_grad_norm(parameters none of which has a .grad, 1.0) (the norm of no gradients is 0.0)")
    properties.run_generator(t, "clip_grad_norm", t.student.clip_grad_norm, "3 parameters with large gradients, 1.5",
                             (worker_parameters(t, big), 1.5))


def assert_same_steps(losses, model, reference: nn.Module, expected: list, what: str, rtol: float = 1e-6) -> None:
    """Exact steps: the losses a training function returned and the weights it left are the reference's."""
    losses = float_list(losses, what, len(expected))
    assert_close(losses, np.array(expected), f"{what}: the loss of each step", rtol=1e-7, atol=1e-9)
    assert_same_weights(model.state_dict(), reference.state_dict(), what, "after training", rtol=rtol, atol=1e-9)


def tbptt_case(t, V: int, d: int, N: int, settings: dict, weights: dict, about: str = "", why: str = "") -> None:
    """The student's train_lm on the given ToyRecurrentLM against the reference's, same weights and stream
    (`about` the weights, `why` a failure's likely cause)."""
    stream = torch.from_numpy(t.rng.integers(0, V, size=N))
    what = f"train_lm(ToyRecurrentLM({V}, {d}){about}, stream ({N},), {spelled(settings)}){why}"
    model = student_module(t, t.student.ToyRecurrentLM, (V, d), weights, F64)
    with library_advice(TBPTT_USES):  # an undetached carried state: PyTorch's "backward ... a second time"
        losses = call_pure(t.student.train_lm, model, stream, what=what, **settings)
    ref = toy_reference(t, V, d, weights)
    assert_same_steps(losses, model, ref, t.ref.train_lm(ref, stream, **settings), what, rtol=1e-7)


def lstm_tbptt_case(t, V: int, E: int, H: int, N: int, settings: dict) -> None:
    """train_lm on the student's RNNLM with LSTMLayer, whose state is a tuple (h, c), against the reference's run.

    Why: ToyRecurrentLM's state is one tensor, so `state.detach()` in train_lm passes on it and breaks on an LSTM.
    Only run when the student's RNNLM with LSTMLayer matches the built-ins (Q2 and Q3 grade those): a wrong LSTM
    must not cost Q4.
    """
    weights = lm_weights(t, "lstm", V, E, H)
    model = student_lm(t, "lstm", V, E, H, weights, F64)
    tokens, state = random_tokens(t, 3, 4, V), random_state(t, "lstm", 3, H, F64)
    try:
        logits, _ = parts(model(tokens, state), 2, "RNNLM")
        assert_module_close(output(logits, None, "RNNLM"), lm_logits("lstm", weights, tokens, state)[0], "RNNLM", F64)
    except CheckFailed:
        t.note("train_lm with an LSTM's (h, c) state was not tried: your RNNLM with LSTMLayer fails Q2/Q3 "
               "(fix those first).")
        return
    stream = torch.from_numpy(t.rng.integers(0, V, size=N))
    what = f"train_lm(RNNLM({V}, {E}, {H}, layer=LSTMLayer), stream ({N},), {spelled(settings)})"
    try:
        losses = call_pure(t.student.train_lm, model, stream, what=what, **settings)
    except StudentError as exc:
        text = explain_library_error(str(exc), TBPTT_USES)
        if text == str(exc):
            text += "\nDetach the carried state with detach_state, which handles tuples."
        raise CheckFailed(f"with an LSTM, whose state is a tuple (h, c) (your RNNLM and LSTMLayer pass their own "
                          f"checks): {text}") from None
    ref = reference_module(t.ref.RNNLM(V, E, H, layer=t.ref.LSTMLayer), weights, F64)
    assert_same_steps(losses, model, ref, t.ref.train_lm(ref, stream, **settings), what)


# Positions visited (properties.Reads): a stream whose token ids are their positions, on a ToyRecurrentLM
# with one embedding row per position. Plain SGD moves a row only when its position is fed to the model
# (the carried state is detached), so the rows a step moved are the positions it read, and each step must
# read what the reference's does: the next chunk of every row, the short last one, then the wrap-around.
WALK_HINT = (" Walk the stream chunk after chunk: each step reads get_chunk(data, i, bptt) and then i += bptt; "
             "start over at i = 0 (state None) only when fewer than two tokens are left (i >= L - 1).")


def embedding_reads(t, fn: str, label: str, models: tuple, weights: dict, table: str, data: tuple, settings: dict,
                    checkpoints: tuple, hint: str, rows: slice = slice(None)) -> properties.Reads:
    """`fn`'s runs (the student's, the reference's) of each of `checkpoints` steps from fresh `models` (makers of the
    student's model and of the reference's, holding `weights`): the `rows` of the embedding `table` they leave."""
    def student_table(k: int):
        model = models[0]()
        getattr(t.student, fn)(model, *data, steps=k, **settings)
        return properties.state_table(model.state_dict(), table, weights[table], rows)

    def reference_table(k: int):
        model = models[1]()
        getattr(t.ref, fn)(model, *data, steps=k, **settings)
        return model.state_dict()[table].detach()[rows]

    return properties.Reads(label, weights[table][rows].to(F64), student_table, checkpoints[-1],
                            reference=reference_table, hint=hint, checkpoints=checkpoints)


def tbptt_reads(t, N: int, settings: dict, checkpoints: tuple) -> properties.Reads:
    """train_lm's runs of each of `checkpoints` steps over the stream 0, 1, .., N - 1 (`settings` without steps)."""
    V, d, B = N, 3, settings["batch_size"]
    weights = toy_weights(t, V, d)
    label = (f"ToyRecurrentLM({V}, {d}), stream 0, 1, .., {N - 1} (each position its own token id; batchify gives "
             f"{B} row(s) of {N // B}: row b holds positions {N // B}b onwards), {spelled(settings)}, runs of "
             f"{', '.join(map(str, checkpoints))} steps")
    models = (lambda: student_module(t, t.student.ToyRecurrentLM, (V, d), weights, F64),
              lambda: toy_reference(t, V, d, weights))
    return embedding_reads(t, "train_lm", label, models, weights, "embedding.weight", (torch.arange(N),), settings,
                           checkpoints, WALK_HINT)


def positions(t, fn: str, *reads: properties.Reads) -> None:
    """The matrix's positions property of the training function `fn` on each of `reads`."""
    properties.run(t, properties.Graded(fn, getattr(t.student, fn), getattr(t.ref, fn), {"positions": list(reads)}),
                   ("positions",))


@check(4, 3, "train_lm exact steps on ToyRecurrentLM: one and two steps, the state carried and detached, "
             "a short last chunk, wrap-around, clipping; and on an LSTM LM, whose state is a pair (h, c); "
             "positions visited: each step reads the next chunk of every row, then wraps around",
       uses=TBPTT_USES, needs=("RNNLM", "LSTMLayer", "LSTMCell"),
       hint="per step: wrap around when i >= L - 1 (i = 0, state None), get_chunk, detach the carried state, forward, "
            "mean cross-entropy, zero_grad, backward, clip_grad_norm(model.parameters(), clip), SGD step, i += bptt.")
def train_lm_exact(t):
    # every step of a short stream (L = 14: chunks at 0, 4, 8, a short one of 1 at 12, then the wrap-around at
    # steps 5 and 6), and a long one in stretches of 10 steps (L = 200: 40 chunks, the last of 4, then 2 more)
    positions(t, "train_lm", tbptt_reads(t, 43, dict(lr=0.5, batch_size=3, bptt=4, clip=1.0), tuple(range(1, 7))),
              tbptt_reads(t, 600, dict(lr=0.5, batch_size=3, bptt=5, clip=1.0), (10, 20, 30, 40, 42)))
    V, d = 7, 5
    weights = toy_weights(t, V, d)
    # a degenerate stream: one chunk per pass, so every step sees the same batch from a fresh state
    tbptt_case(t, V, d, 16, dict(steps=2, lr=0.5, batch_size=3, bptt=4, clip=1e6), weights)
    for steps in (1, 2, 4):
        tbptt_case(t, V, d, 35, dict(steps=steps, lr=0.3, batch_size=3, bptt=4, clip=0.05), weights)
    tbptt_case(t, V, d, 35, dict(steps=3, lr=0.3, batch_size=3, bptt=4, clip=0.05),
               dict(weights, **{"proj.weight": weights["proj.weight"] * LOUD}), " with logits of about a thousand",
               " (an infinite loss: log of an underflowed softmax; use F.cross_entropy)")
    tbptt_case(t, V, d, 35, dict(steps=2, lr=0.0, batch_size=3, bptt=4, clip=0.05), weights,
               why=" (lr=0.0 leaves the weights as they are)")
    lstm_tbptt_case(t, 7, 4, 5, 35, dict(steps=4, lr=0.3, batch_size=3, bptt=4, clip=0.05))


@check(4, 1, "train_lm: two runs from the same weights give identical losses; batch of one, bptt 1 (positions "
             "visited: one new position a step, then the wrap-around)",
       uses=TBPTT_USES)
def train_lm_repeatable(t):
    # positions 0 .. 7, then 0, 1
    positions(t, "train_lm", tbptt_reads(t, 9, dict(lr=0.5, batch_size=1, bptt=1, clip=1.0), tuple(range(1, 11))))
    V, d = 6, 3
    weights = toy_weights(t, V, d)
    tbptt_case(t, V, d, 9, dict(steps=5, lr=0.2, batch_size=1, bptt=1, clip=0.3), weights)
    stream = torch.from_numpy(t.rng.integers(0, V, size=40))
    runs = []
    for _ in range(2):
        model = student_module(t, t.student.ToyRecurrentLM, (V, d), weights, F64)
        with library_advice(TBPTT_USES):
            runs.append(t.student.train_lm(model, stream, steps=6, lr=0.1, batch_size=2, bptt=5, clip=1.0))
    assert_close(as_array(runs[1], "train_lm losses")[0], as_array(runs[0], "train_lm losses")[0],
                 "train_lm twice from the same weights: the losses of the second run", rtol=0, atol=0)
    # the model on a non-CPU device, the stream on the CPU where a caller keeps it: the loop moves what it feeds
    model = student_module(t, t.student.ToyRecurrentLM, (V, d), weights, F64)
    properties.run_device(t, "train_lm", t.student.train_lm, "ToyRecurrentLM on the device, stream (40,) on the CPU, "
                          "steps=3", (model, stream), dict(steps=3, lr=0.1, batch_size=2, bptt=5, clip=1.0),
                          move_data=False, generator=True, **IN_FLOAT64)


# ---- Q5: gradient norms through time ----------------------------------------------------------
@check(5, 3, "hidden_grad_norms against the reference's: tanh RNN at small and large W_hh, LSTM, GRU, a given state, T = 1",
       uses=("hidden_grad_norms",), needs=("RNNCell", "LSTMCell"),
       hint="keep every state h_t of the loop (not the stacked outputs), L = h_T.sum(), torch.autograd.grad(L, states), "
            "one norm per state over the whole (B, H) gradient.")
def hidden_grad_norms_hidden(t):
    B, T, d, H = 3, 9, 4, 5
    cases = []
    for kind, scale in (("rnn", 1.0), ("rnn", 4.0), ("lstm", 1.0), ("gru", 1.0)):
        weights = cell_weights(t, kind, d, H)
        weights["weight_hh"] = weights["weight_hh"] * scale
        cases.append((kind, scale, weights))
    for kind, scale, weights in cases:
        if kind == "gru":
            try:
                t.student.GRUCell(d, H)(randn(t, 1, d, dtype=F32), randn(t, 1, H, dtype=F32))
            except StudentError:
                continue  # extra credit not attempted: its norms are not asked for
        cell = student_module(t, getattr(t.student, CELL[kind]), (d, H), weights, F64)
        for label, state, steps in (("no state", None, T), ("a state", random_state(t, kind, B, H, F64), T),
                                    ("T = 1", None, 1)):
            x = randn(t, B, steps, d)
            what = f"hidden_grad_norms({CELL[kind]}({d}, {H}) with W_hh scaled by {scale}, x ({B}, {steps}, {d}), {label})"
            args = (cell, x) if state is None else (cell, x, state)
            got = call_pure(t.student.hidden_grad_norms, *args, what=what)
            assert_shape(output(got, None, what), (steps,), what)
            assert_dtype(got, "float64", what + " (float64 inputs and weights)")
            truth = t.ref.hidden_grad_norms(reference_module(getattr(t.ref, CELL[kind])(d, H), weights, F64), x, state)
            assert_close(got, truth, what, rtol=1e-6, atol=1e-12)
    for kind in ("rnn", "lstm"):
        cell = student_module(t, getattr(t.student, CELL[kind]), (d, H), cell_weights(t, kind, d, H), F64)
        properties.run_device(t, "hidden_grad_norms", t.student.hidden_grad_norms,
                              f"{CELL[kind]}({d}, {H}), x ({B}, 4, {d})", (cell, randn(t, B, 4, d)), generator=True,
                              **IN_FLOAT64)


# ---- Q6: decoding on grader-made table models -------------------------------------------------
DECODE_USES = ("greedy_decode", "sample", "beam_search")


def next_logprobs(table: np.ndarray, seq: list) -> np.ndarray:
    """log p(next | seq) of the TableModel: logits table[seq[-2], seq[-1]] (a lone token is its own predecessor)."""
    logits = table[seq[-2] if len(seq) > 1 else seq[-1], seq[-1]]
    shifted = logits - logits.max()
    return shifted - np.log(np.exp(shifted).sum())


def seq_logprob(table, prefix: list, tokens: list) -> float:
    total, seq = 0.0, list(prefix)
    for token in tokens:
        total += float(next_logprobs(table, seq)[token])
        seq.append(token)
    return total


def all_hypotheses(V: int, max_len: int, eos: int) -> list:
    """Every finished sequence: ending in eos within max_len tokens, or max_len tokens without eos."""
    out, frontier = [], [[]]
    for length in range(1, max_len + 1):
        frontier = [s + [v] for s in frontier for v in range(V)]
        out += [s for s in frontier if s[-1] == eos]
        frontier = [s for s in frontier if s[-1] != eos]
    return out + frontier


def random_table(t, V: int, scale: float = 1.5) -> np.ndarray:
    return t.rng.standard_normal((V, V, V)) * scale


def loud_table(t, V: int, scale: float = 1000.0) -> np.ndarray:
    """Logits of thousands with a clear winner in every context (each row a permutation of 0..V-1 times scale,
    plus noise): softmax is one-hot there, so sampling must give the greedy sequence, and exp by hand overflows."""
    ranks = np.argsort(t.rng.random((V, V, V)), axis=-1).astype(np.float64)
    return ranks * scale + t.rng.standard_normal((V, V, V))


def token_list(value, what: str) -> list:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise CheckFailed(f"{what} should return a list of ints (token ids), got {type(value).__name__} "
                          f"{str(value)[:80]}")
    return list(value)


def decoder_matrix(t, fn: str) -> properties.Graded:
    """A decoder's samples for the property matrix, on grader-made TableModels (the reference's holds the same table).

    Shapes: a ToyRecurrentLM whose state is a pair, as the student's own LSTM LM's is (a decoder that calls
    `state.clone()` works on the table's tensor state only). Edges: max_len=0 (no token; beam_search's one empty hypothesis, score 0.0, whatever alpha), a prefix of one
    token, max_len=1, a beam of one. Extremes: logits of thousands with a clear winner in every context, where
    softmax is one-hot (sampling gives the greedy sequence at any temperature) and exp by hand overflows. Device:
    that table and a ToyRecurrentLM, which embeds the tokens fed to it (ids made on the CPU fail on a GPU)."""
    def model(table):
        return properties.Both(t.student.TableModel(torch.from_numpy(table)), t.ref.TableModel(torch.from_numpy(table)))
    quiet, loud, S = model(random_table(t, 5)), model(loud_table(t, 5)), properties.Sample
    if fn == "beam_search":
        edges = [S(f"TableModel (V = 5), prefix [1, 2], beam_size={k}, max_len=0, eos_id=4, alpha={a}",
                   (quiet, [1, 2], k, 0, 4), {"alpha": a}) for k, a in ((3, 0.6), (1, 1.0), (2, 0.0))]
        edges += [S("TableModel (V = 5), prefix [3] (one token), beam_size=2, max_len=1, eos_id=4, alpha=1.0",
                    (quiet, [3], 2, 1, 4), {"alpha": 1.0})]
        extremes = [S(f"TableModel (logits of thousands), prefix [1], beam_size={k}, max_len=4, eos_id=0, alpha=1.0",
                      (loud, [1], k, 4, 0), {"alpha": 1.0}) for k in (2, 3)]
    elif fn == "sample":
        edges = [S("TableModel (V = 5), prefix [1, 2], max_len=0, eos_id=4, seed=3", (quiet, [1, 2], 0, 4), {"seed": 3}),
                 S("TableModel (logits of thousands), prefix [3] (one token), max_len=1, eos_id=4, temperature=0.5",
                   (loud, [3], 1, 4), {"temperature": 0.5})]
        extremes = [S(f"TableModel (logits of thousands), prefix [1, 2], max_len=5, eos_id=4, temperature={temp}, "
                      f"seed={seed}", (loud, [1, 2], 5, 4), {"temperature": temp, "seed": seed})
                    for temp, seeds in ((1.0, range(3)), (0.05, range(3)), (0.01, range(1))) for seed in seeds]
    else:
        edges = [S("TableModel (V = 5), prefix [1, 2], max_len=0, eos_id=4", (quiet, [1, 2], 0, 4)),
                 S("TableModel (V = 5), prefix [3] (one token), max_len=1, eos_id=0", (quiet, [3], 1, 0))]
        extremes = [S("TableModel (logits of thousands), prefix [1, 2], max_len=5, eos_id=4", (loud, [1, 2], 5, 4))]
    # an ordinary call for the generator property (an edge call may return before the code that draws)
    generator = {"sample": S("TableModel (V = 5), prefix [1, 2], max_len=6, eos_id=4, temperature=1.0, seed=5",
                             (quiet, [1, 2], 6, 4), {"temperature": 1.0, "seed": 5}),
                 "beam_search": S("TableModel (V = 5), prefix [1, 2], beam_size=2, max_len=4, eos_id=4",
                                  (quiet, [1, 2], 2, 4, 4)),
                 "greedy_decode": S("TableModel (V = 5), prefix [1, 2], max_len=4, eos_id=4", (quiet, [1, 2], 4, 4))}[fn]
    toy_w = toy_weights(t, 5, 3)
    toy = student_module(t, t.student.ToyRecurrentLM, (5, 3), toy_w, F64)
    # a model whose state is a pair, as the student's own LSTM LM's is: decoders pass a state on as it is
    # (logits of thousands: sampling is greedy there, whatever the sampler draws; eos_id 4 is never likely, so
    # every call feeds a state back)
    pair_w = dict(toy_w, **{"proj.weight": toy_w["proj.weight"] * 1000.0,
                            "proj.bias": toy_w["proj.bias"] - 1e5 * (torch.arange(5) == 4)})
    pair = properties.Both(student_module(t, t.student.ToyRecurrentLM, (5, 3), pair_w, F64, pair_state=True),
                           reference_module(t.ref.ToyRecurrentLM(5, 3, pair_state=True), pair_w, F64))
    pair_shown, hint = ("ToyRecurrentLM(5, 3, pair_state=True) (its state a pair, as an LSTM's (h, c)), prefix [1, 2]",
                         " The state may be a tuple, as an LSTM's (h, c) is: pass it on as the model returned it.")
    shapes = [S(f"{pair_shown}, beam_size=2, max_len=3, eos_id=4", (pair, [1, 2], 2, 3, 4), hint=hint)
              if fn == "beam_search" else S(f"{pair_shown}, max_len=4, eos_id=4", (pair, [1, 2], 4, 4),
                                            {"seed": 3} if fn == "sample" else {}, hint=hint)]
    args, shown = (([1], 2, 3, 0), "prefix [1], beam_size=2, max_len=3, eos_id=0") if fn == "beam_search" else \
        (([1, 2], 3, 4), "prefix [1, 2], max_len=3, eos_id=4")
    device = [D(f"{label}, {shown}", (m, *args), **IN_FLOAT64)
              for label, m in (("TableModel (logits of thousands)", loud.student), ("ToyRecurrentLM(5, 3)", toy))]
    return properties.Graded(fn, getattr(t.student, fn), getattr(t.ref, fn),
                             {"shapes": shapes, "edges": edges, "extremes": extremes, "device": device}, generator)


@check(6, 2, "greedy_decode: whole sequences on random table models, stopping at </s> (eos 0 or 4), max_len, "
             "prefixes of 1 and 3 tokens", uses=("greedy_decode",),
       hint="feed the prefix once, then one token at a time with the returned state; stop right after eos_id.")
def greedy_hidden(t):
    for trial in range(6):
        V, eos = 5, (4 if trial % 2 else 0)
        table = random_table(t, V)
        if trial == 2:
            table[:, :, eos] = -5.0  # never ends: max_len cuts it
        if trial == 3:
            table[3, 3, eos] = 9.0  # ends at once
        prefix = [3] if trial in (2, 3) else [int(v) for v in t.rng.integers(0, V, size=3)]
        for max_len in (1, 6):
            what = f"greedy_decode(TableModel(table {trial}), prefix={prefix}, max_len={max_len}, eos_id={eos})"
            got = token_list(call_pure(t.student.greedy_decode, t.student.TableModel(torch.from_numpy(table)), prefix,
                                       max_len, eos, what=what), what)
            assert_equal(got, t.ref.greedy_decode(t.ref.TableModel(torch.from_numpy(table)), prefix, max_len, eos), what)
    properties.run(t, decoder_matrix(t, "greedy_decode"))


SAMPLES = 1500
SAMPLE_ALPHA = 1e-6  # a correct sampler fails one of these tests once in a million seed sets


@check(6, 3, f"sample: whole sequences follow softmax(logits / T) for T = 1, 0.5 and 2 ({SAMPLES} seeds, chi-square "
             f"at p < {SAMPLE_ALPHA:g}); a seed gives one reproducible sequence; the global generator left alone",
       uses=("sample",),
       hint="one torch.Generator().manual_seed(seed) per call (not per step), probabilities softmax(logits / "
            "temperature), torch.multinomial(probs, 1, generator=g); stop after eos_id.")
def sample_hidden(t):
    V, eos, max_len, prefix = 4, 3, 3, [1, 2]
    table = random_table(t, V, 1.0)
    model = t.student.TableModel(torch.from_numpy(table))
    hypotheses = all_hypotheses(V, max_len, eos)
    index = {tuple(h): i for i, h in enumerate(hypotheses)}
    for temperature in (1.0, 0.5, 2.0):
        scaled = table / temperature
        probs = np.exp([seq_logprob(scaled, prefix, h) for h in hypotheses])
        base = 1000 * int(temperature * 10)
        calls = [(model, prefix, max_len, eos, temperature, base + s) for s in range(SAMPLES)]
        got = t.student.sample.map(calls, timeout=120)
        counts = np.zeros(len(hypotheses))
        for seq in got:
            key = tuple(token_list(seq, f"sample(TableModel, {prefix}, {max_len}, {eos}, temperature={temperature})"))
            if key not in index:
                raise CheckFailed(f"sample(..., max_len={max_len}, eos_id={eos}, temperature={temperature}) returned "
                                  f"{list(key)}: not a possible output (longer than max_len, or going on after eos_id)")
            counts[index[key]] += 1
        p, _, df = chi_square.pearson(counts, probs)
        if p < SAMPLE_ALPHA:
            worst = int(np.argmax(np.abs(counts - probs * SAMPLES) / np.sqrt(probs * SAMPLES + 1)))
            raise CheckFailed(
                f"sample(TableModel, prefix={prefix}, max_len={max_len}, eos_id={eos}, temperature={temperature}) "
                f"over seeds {base}..{base + SAMPLES - 1}: the frequencies of whole sequences do not follow the model "
                f"(chi-square p = {p:.2g} with {df} degrees of freedom). E.g. {hypotheses[worst]} came "
                f"{int(counts[worst])} times, expected about {probs[worst] * SAMPLES:.0f}. Check the temperature "
                "(divide the logits by it) and that the generator is created once per call.")
    what = f"sample(TableModel, {prefix}, 6, {eos}, temperature=1.0, seed=11)"
    call_pure(t.student.sample, model, prefix, 6, eos, temperature=0.7, seed=3, what=what.replace("1.0", "0.7"))
    first = call_twice(t.student.sample, model, prefix, 6, eos, temperature=1.0, seed=11, what=what)
    assert_equal(token_list(t.student.sample(model, prefix, 6, eos, seed=11), what), token_list(first, what),
                 f"sample(TableModel, {prefix}, 6, {eos}, seed=11) (temperature left at its default, 1.0) vs {what}")
    assert_equal(token_list(t.student.sample(model, prefix, 6, eos), what),
                 token_list(t.student.sample(model, prefix, 6, eos, 1.0, 0), what),
                 f"sample(TableModel, {prefix}, 6, {eos}) (defaults) vs the same with temperature=1.0, seed=0")
    properties.run(t, decoder_matrix(t, "sample"))


def beam_list(value, what: str, beam_size: int) -> list:
    if not isinstance(value, (list, tuple)) or not value:
        raise CheckFailed(f"{what} should return a non-empty list of (tokens, score) pairs, got {str(value)[:80]}")
    if len(value) > beam_size:
        raise CheckFailed(f"{what} returned {len(value)} hypotheses, more than beam_size = {beam_size}")
    out = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            raise CheckFailed(f"{what}: each hypothesis should be a pair (tokens, score), got {str(item)[:80]}")
        tokens = token_list(item[0], what + " tokens")
        out.append((tokens, float(as_array(item[1], what + " score")[0])))
    return out


def assert_beams_consistent(beams, table, prefix, max_len, eos, alpha, what):
    """Every returned score is the grader's normalized log-probability of its tokens; order and endings."""
    for tokens, score in beams:
        if not tokens or len(tokens) > max_len or (eos in tokens[:-1]) or (tokens[-1] != eos and len(tokens) < max_len):
            raise CheckFailed(f"{what} returned the hypothesis {tokens}: a hypothesis ends at its first eos_id ({eos}) "
                              f"or after max_len ({max_len}) tokens, never elsewhere")
        expected = seq_logprob(table, prefix, tokens) / len(tokens) ** alpha
        assert_close(score, expected, f"{what}: the score of {tokens} (log-probability / {len(tokens)}^{alpha})",
                     rtol=1e-6, atol=1e-9)
    scores = [s for _, s in beams]
    if any(a < b - 1e-9 for a, b in zip(scores, scores[1:])):
        raise CheckFailed(f"{what}: hypotheses are not sorted by score, best first: {[round(s, 4) for s in scores]}")
    if len({tuple(tokens) for tokens, _ in beams}) != len(beams):
        raise CheckFailed(f"{what}: the same hypothesis is returned twice")


@check(6, 1.5, "beam_search of width 1 equals greedy decoding (alpha 0 and 1)", uses=("beam_search",))
def beam_width_one(t):
    for trial in range(4):
        V, eos = 5, trial % 5
        table = random_table(t, V)
        prefix = [int(v) for v in t.rng.integers(0, V, size=2)]
        for alpha in (0.0, 1.0):
            what = f"beam_search(TableModel(table {trial}), {prefix}, beam_size=1, max_len=5, eos_id={eos}, alpha={alpha})"
            beams = beam_list(call_pure(t.student.beam_search, t.student.TableModel(torch.from_numpy(table)), prefix, 1,
                                        5, eos, alpha=alpha, what=what), what, 1)
            greedy = t.ref.greedy_decode(t.ref.TableModel(torch.from_numpy(table)), prefix, 5, eos)
            assert_equal(beams[0][0], greedy, what + ": the hypothesis (greedy decoding's)")
            assert_beams_consistent(beams, table, prefix, 5, eos, alpha, what)


@check(6, 2.5, "beam_search as wide as every sequence finds the exhaustive optimum; length normalization "
               "(alpha 0, 0.6, 1) changes the winner as stated", uses=("beam_search",),
       hint="rank the FINISHED hypotheses by log-probability / len(tokens)**alpha (len counts </s>); prune the open "
            "ones by plain log-probability.")
def beam_exhaustive(t):
    V, eos, max_len, prefix = 4, 3, 4, [0]
    everything = all_hypotheses(V, max_len, eos)
    winners = set()
    for trial in range(2):
        table = random_table(t, V)
        table[:, :, eos] -= 0.8  # long and short outputs compete
        for alpha in (0.0, 0.6, 1.0):
            ranked = sorted(((seq_logprob(table, prefix, h) / len(h) ** alpha, h) for h in everything), reverse=True)
            width = len(everything) + 4
            what = f"beam_search(TableModel(table {trial}), {prefix}, beam_size={width}, max_len={max_len}, eos_id={eos}, alpha={alpha})"
            beams = beam_list(call_pure(t.student.beam_search, t.student.TableModel(torch.from_numpy(table)), prefix,
                                        width, max_len, eos, alpha=alpha, what=what), what, width)
            assert_beams_consistent(beams, table, prefix, max_len, eos, alpha, what)
            assert_equal(beams[0][0], ranked[0][1], what + ": the best hypothesis (found by trying every sequence)")
            top = min(5, len(beams))
            assert_equal([b[0] for b in beams[:top]], [h for _, h in ranked[:top]], what + f": the {top} best hypotheses")
            winners.add((trial, tuple(ranked[0][1]), alpha))
    what = "beam_search(TableModel, [1, 2], beam_size=3, max_len=5, eos_id=2) (alpha left at its default, 1.0)"
    table = random_table(t, 5)
    model = t.student.TableModel(torch.from_numpy(table))
    beams = beam_list(t.student.beam_search(model, [1, 2], 3, 5, 2), what, 3)
    assert_beams_consistent(beams, table, [1, 2], 5, 2, 1.0, what)


@check(6, 1.5, "beam_search of widths 2 and 3 keeps the same hypotheses as the reference's beam at every step "
               "(alpha 0, 0.7, 1)", uses=("beam_search",),
       hint="at each step extend every open hypothesis by every token and keep the beam_size best of ALL the "
            "extensions by log-probability; those ending in eos_id are finished: they leave the beam (which then "
            "holds fewer open hypotheses) but still took one of the beam_size places.")
def beam_narrow(t):
    V, max_len = 5, 6
    for trial in range(6):
        eos = trial % V
        table = random_table(t, V, 1.0)
        table[:, :, eos] += 0.5  # hypotheses finish at every step, while others stay open
        prefix = [int(v) for v in t.rng.integers(0, V, size=1 + trial % 2)]
        for width in (2, 3):
            for alpha in (0.0, 0.7, 1.0):
                what = (f"beam_search(TableModel(table {trial}), {prefix}, beam_size={width}, max_len={max_len}, "
                        f"eos_id={eos}, alpha={alpha})")
                beams = beam_list(call_pure(t.student.beam_search, t.student.TableModel(torch.from_numpy(table)),
                                            prefix, width, max_len, eos, alpha=alpha, what=what), what, width)
                assert_beams_consistent(beams, table, prefix, max_len, eos, alpha, what)
                expected = t.ref.beam_search(t.ref.TableModel(torch.from_numpy(table)), prefix, width, max_len, eos,
                                             alpha=alpha)
                assert_equal([b[0] for b in beams], [list(tokens) for tokens, _ in expected],
                              what + ": the returned hypotheses, best first")
    properties.run(t, decoder_matrix(t, "beam_search"))


# ---- Q7: Shakespeare ----------------------------------------------------------------------------
@lru_cache(maxsize=1)
def char_data() -> tuple:
    """Lowercased characters of the plays: vocabulary and id streams (the test plays never leave the grader)."""
    from autograder.data import shakespeare
    train = shakespeare.text("train").lower()
    vocab = sorted(set(train))
    index = {ch: i for i, ch in enumerate(vocab)}
    need = Q7_SETTINGS["steps"] * Q7_SETTINGS["batch_size"] * Q7_SETTINGS["bptt"] + Q7_SETTINGS["batch_size"]
    train_ids = torch.tensor([index[ch] for ch in train[:need]], dtype=torch.int64)
    test_ids = torch.tensor([index[ch] for ch in shakespeare.text("test").lower()], dtype=torch.int64)
    return vocab, train_ids, test_ids


def q7_model(ref, V: int):
    return ref.RNNLM(V, Q7_MODEL["emb_dim"], Q7_MODEL["hidden_size"], layer=ref.LSTMLayer)


def q7_init(ref, V: int) -> dict:
    """The threshold run's initial weights (float32); each submission gets its own, from the secret."""
    torch.manual_seed(Q7_INIT_SEED)
    return {k: v.detach().clone() for k, v in q7_model(ref, V).state_dict().items()}


@one_thread()
def test_perplexity(state: dict, test_ids: torch.Tensor, chunk: int = 1024) -> float:
    """The grader's own forward (nn.LSTM with the returned weights) over the test plays in 16 streams.

    Chunks of time with the state carried keep the grader's memory small (Gradescope's 768 MB).
    """
    V, E = state["embedding.weight"].shape
    H = state["rnn.cell.weight_hh"].shape[1]
    lstm = builtin_layer("lstm", {k: v.double() for k, v in state.items()}, E, H, "rnn.cell.").float()
    emb, proj_w, proj_b = (state[k].float() for k in ("embedding.weight", "proj.weight", "proj.bias"))
    data = test_ids[: (len(test_ids) // 16) * 16].view(16, -1)  # (16, L)
    total, count, hidden = 0.0, 0, None
    with torch.no_grad():
        for i in range(0, data.size(1) - 1, chunk):
            inputs, targets = data[:, i:i + chunk], data[:, i + 1:i + 1 + chunk]
            inputs = inputs[:, :targets.size(1)]
            out, hidden = lstm(emb[inputs], hidden)  # (16, n, H)
            logits = out @ proj_w.T + proj_b  # (16, n, V)
            total += float(F.cross_entropy(logits.reshape(-1, V).double(), targets.reshape(-1), reduction="sum"))
            count += targets.numel()
    return math.exp(total / count)


def q7_threshold_run(ref) -> dict:
    """The reference's own training from the threshold run's weights: its test perplexity and start profile."""
    return _q7_threshold_run(ref, repr(sorted(Q7_SETTINGS.items())))


@lru_cache(maxsize=4)  # one training for both reference results; keyed on the settings too
@one_thread()
def _q7_threshold_run(ref, settings_key: str) -> dict:
    vocab, train_ids, test_ids = char_data()
    init = q7_init(ref, len(vocab))
    model = q7_model(ref, len(vocab))
    model.load_state_dict(init)
    ref.train_lm(model, train_ids, **Q7_SETTINGS)
    return {"perplexity": test_perplexity(model.state_dict(), test_ids),
            "start": start_profile(init, model.state_dict())}


@reference_result("q7-shakespeare", "q7-start")
def reference_q7(ref) -> tuple:
    """(test perplexity, start profile) of the reference's own training from the threshold run's weights and the
    settings, scored like a submission: how much of its start each matrix keeps (`start_profile`)."""
    run = q7_threshold_run(ref)
    return run["perplexity"], run["start"]


def replay_first_steps(t, name: str, model, data: tuple, reference: nn.Module, ref_data: tuple, settings: dict,
                       what: str, uses: tuple = TBPTT_USES) -> None:
    """The first FIRST_STEPS steps of a graded training (the student's `name` on `model` holding the secret start,
    in float64) leave the weights the reference's steps from the same start leave."""
    short = dict(settings, steps=FIRST_STEPS)
    with library_advice(uses):
        getattr(t.student, name)(model, *data, **short)
    getattr(t.ref, name)(reference, *ref_data, **short)
    assert_same_weights(model.state_dict(), reference.state_dict(), what.replace(f"steps={settings['steps']}",
                        f"steps={FIRST_STEPS}") + " in float64", f"after the first {FIRST_STEPS} steps, vs the "
                        "reference's from the same weights", rtol=1e-6, atol=1e-9)


@check(7, 5, "train_lm trains an LSTM RNNLM on Shakespeare: the grader's test-play perplexity of the weights",
       timeout=240, uses=("train_lm",), needs=("RNNLM", "LSTMLayer", "LSTMCell", "batchify", "get_chunk",
                                                 "detach_state", "clip_grad_norm"))
def shakespeare_lstm(t):
    """Why two runs: the short one from the same secret start must equal the reference's steps; the long one
    must keep that start's trace (so it is the student's own training of the model it was given)."""
    vocab, train_ids, test_ids = char_data()
    V = len(vocab)
    init = t.secret_state("initial weights", lambda: q7_model(t.ref, V))
    layer = t.student.LSTMLayer.get()
    stream = t.student.put(train_ids, "the training characters")
    args = (V, Q7_MODEL["emb_dim"], Q7_MODEL["hidden_size"])
    what = (f"train_lm(RNNLM({V}, 32, 128, layer=LSTMLayer) holding the grader's initial weights, Shakespeare train "
            f"characters ({len(train_ids)},), {spelled(Q7_SETTINGS)})")
    replay_first_steps(t, "train_lm", student_module(t, t.student.RNNLM, args, init, F64, layer=layer), (stream,),
                       reference_module(q7_model(t.ref, V), init, F64), (train_ids,), Q7_SETTINGS, what)
    model = student_module(t, t.student.RNNLM, args, init, F32, layer=layer)
    with library_advice(TBPTT_USES):
        float_list(t.student.train_lm(model, stream, **Q7_SETTINGS), what, Q7_SETTINGS["steps"])
    state = checked_state(model.state_dict(), init, what)
    profile = t.cached("q7-start", lambda: q7_threshold_run(t.ref)["start"])
    assert_descends(init, state, profile, what, least=START_LEAST, mean=START_MEAN)
    judge_q7(t, what, test_perplexity(state, test_ids), V)


def judge_q7(t, what: str, ppl: float, V: int) -> None:
    judge_trained_perplexity(t, what, ppl, V, t.cached("q7-shakespeare", lambda: q7_threshold_run(t.ref)["perplexity"]),
                             PPL_MARGIN, "Your trained LSTM on the test plays (per character)",
                             "rnn_lm Q7: test perplexity per character")


# ---- Q8: encoder-decoder with attention ---------------------------------------------------------
S2S_USES = ("AdditiveAttention", "Seq2Seq")
S2S_NEEDS = ("LSTMLayer", "LSTMCell")


def attention_weights(t, Hq: int, Hk: int, A: int) -> dict:
    return {"query_proj.weight": randn(t, A, Hq, dtype=F32, scale=Hq ** -0.5),
            "key_proj.weight": randn(t, A, Hk, dtype=F32, scale=Hk ** -0.5),
            "key_proj.bias": randn(t, A, dtype=F32, scale=0.3), "score.weight": randn(t, 1, A, dtype=F32)}


def true_attention(w: dict, query, keys, mask):
    w = {k: v.double() for k, v in w.items()}
    hidden = torch.tanh((query.double() @ w["query_proj.weight"].T)[:, None]
                        + keys.double() @ w["key_proj.weight"].T + w["key_proj.bias"])  # (B, S, A)
    scores = (hidden @ w["score.weight"].T)[..., 0]  # (B, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    weights = torch.softmax(scores, dim=-1)
    return torch.einsum("bs,bsh->bh", weights, keys.double()), weights


def length_mask(lengths, S: int) -> torch.Tensor:
    return torch.arange(S)[None, :] < torch.tensor(lengths)[:, None]


def additive_attention_matrix(t, w: dict, Hq: int, Hk: int, A: int) -> properties.Graded:
    """AdditiveAttention's extreme samples for the property matrix, forward and backward against the reference module.

    Scores of thousands (score.weight times 1000: exp(scores) / sum by hand is inf / inf) and a saturated tanh
    (query and keys of about 1000: tanh as 1 - 2/(exp(2z) + 1) is right forward and NaN backward), float64 and
    float32, with and without a mask (with scores of thousands, a mask of every position: a stable softmax that
    subtracts the maximum over masked positions too, then renormalizes, is accepted elsewhere and would underflow).
    Device: float32 at ordinary scale, with a mask and with the mask left at its default (None)."""
    samples = []
    for label, weights, scale, lengths in (
            ("scores of thousands", dict(w, **{"score.weight": w["score.weight"] * 1000.0}), 1.0, [6, 6, 6]),
            ("a saturated tanh", w, 1000.0, [6, 2, 4])):
        reference = reference_module(t.ref.AdditiveAttention(Hq, Hk, A), weights, F64)
        for dtype in (F64, F32):
            module = student_module(t, t.student.AdditiveAttention, (Hq, Hk, A), weights, dtype)
            query, keys = randn(t, 3, Hq, dtype=dtype, scale=scale), randn(t, 3, 6, Hk, dtype=dtype, scale=scale)
            for mask, shown in ((length_mask(lengths, 6), f"lengths {lengths}"), (None, "no mask")):
                samples.append(properties.Sample(
                    f"query (3, {Hq}), keys (3, 6, {Hk}) with {label}, {shown}, {name_of(dtype)}", (query, keys, mask),
                    wrt=(0, 1), output_index=0, call=module, reference=reference,
                    # the context sums keys of size `scale`: its rounding error scales with them, not with the result
                    tol=(MODULE_TOLERANCES[dtype][0], MODULE_TOLERANCES[dtype][1] * scale)))
    module = student_module(t, t.student.AdditiveAttention, (Hq, Hk, A), w, F32)
    query, keys, shown = randn(t, 2, Hq, dtype=F32), randn(t, 2, 5, Hk, dtype=F32), f"query (2, {Hq}), keys (2, 5, {Hk})"
    device = [D(f"{shown}, lengths [5, 2]", (query, keys, length_mask([5, 2], 5)), call=module),
              D(f"{shown} (mask left at None)", (query, keys), call=module)]
    return properties.Graded(f"AdditiveAttention({Hq}, {Hk}, {A})", None, None, {"extremes": samples, "device": device})


@check(8, 2, "AdditiveAttention against the formula: masks, batch of one, one source position (in batches of one and "
             "more), float32 and float64",
       uses=("AdditiveAttention",),
       hint="scores (B, S) = score(tanh(query_proj(query)[:, None, :] + key_proj(keys))); mask before a softmax over "
            "the source positions (dim=-1); context = weights-weighted sum of the keys.")
def attention_hidden(t):
    Hq, Hk, A = 3, 4, 5
    w = attention_weights(t, Hq, Hk, A)
    for dtype in DTYPES:
        module = student_module(t, t.student.AdditiveAttention, (Hq, Hk, A), w, dtype)
        for B, S, lengths in ((3, 6, [6, 2, 4]), (3, 6, None), (1, 1, [1]), (2, 7, [1, 7]), (3, 1, [1, 1, 1]), (2, 1, None)):
            query, keys = randn(t, B, Hq, dtype=dtype), randn(t, B, S, Hk, dtype=dtype)
            mask = None if lengths is None else length_mask(lengths, S)
            what = (f"AdditiveAttention({Hq}, {Hk}, {A})(query ({B}, {Hq}), keys ({B}, {S}, {Hk}), "
                    f"{'no mask' if mask is None else f'lengths {lengths}'}, {name_of(dtype)})")
            context, weights = parts(call_pure(module, query, keys, mask, what=what), 2, what)
            expected_context, expected_weights = true_attention(w, query, keys, mask)
            assert_shape(output(weights, None, what), (B, S), what + " weights")
            assert_module_close(weights, expected_weights, what + " weights", dtype)
            assert_module_close(context, expected_context, what + " context", dtype)
            if mask is not None and bool((output(weights, None, what)[~mask] != 0).any()):
                raise CheckFailed(f"{what}: padded positions got a non-zero weight; mask the scores before the softmax")
    properties.run(t, additive_attention_matrix(t, w, Hq, Hk, A))


@check(8, 1, "AdditiveAttention gradients (gradcheck w.r.t. query and keys, and every parameter, float64)",
       uses=("AdditiveAttention",))
def attention_gradients(t):
    w = attention_weights(t, 3, 4, 5)
    module = student_module(t, t.student.AdditiveAttention, (3, 4, 5), w, F64)
    query, keys, mask = randn(t, 2, 3), randn(t, 2, 6, 4), length_mask([6, 3], 6)
    gradcheck(module, [query, keys, mask], [0, 1], "AdditiveAttention(3, 4, 5) context", output_index=0)
    assert_param_grads(module, reference_module(t.ref.AdditiveAttention(3, 4, 5), w, F64), [query, keys, mask],
                       "AdditiveAttention(3, 4, 5)", rng=t.rng, output_index=0)


def s2s_weights(ref, seed: int, emb_dim: int, hidden_size: int, attn_size: int, eos_bias: float = 0.0,
                vocab: int = S2S_VOCAB) -> dict:
    torch.manual_seed(seed)
    model = ref.Seq2Seq(vocab, emb_dim, hidden_size, attn_size)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state["out.bias"][EOS] += eos_bias
    return state


def s2s_reference(ref, state: dict, dtype=F64, vocab: int = S2S_VOCAB, **dims):
    return reference_module(ref.Seq2Seq(vocab, **dims), state, dtype)


def digit_pairs(rng, n: int, max_len: int = S2S_MAX) -> tuple:
    """Random digit strings of length 3..max_len and their reversals, padded (the toy task)."""
    lengths = rng.integers(3, max_len + 1, size=n)
    src = torch.zeros(n, max_len, dtype=torch.int64)
    tgt = torch.zeros(n, max_len + 1, dtype=torch.int64)
    for row, length in enumerate(lengths):
        digits = torch.from_numpy(rng.integers(0, 10, size=int(length))) + DIGIT0
        src[row, :length] = digits
        tgt[row, :length] = digits.flip(0)
        tgt[row, length] = EOS
    return src, tgt


SMALL = dict(emb_dim=5, hidden_size=6, attn_size=4)


@check(8, 2, "Seq2Seq forward: logits and attention weights (B, T, S) against the reference with the same weights; "
             "every parameter's gradient", uses=S2S_USES, needs=S2S_NEEDS,
       hint="decoder step i: attend with the current h, run the decoder cell on [embedding of tgt_in[:, i]; context], "
            "logits from out([new h; context]); start from the encoder's final (h, c).")
def seq2seq_forward_hidden(t):
    state = s2s_weights(t.ref, t.seed % 1000, **SMALL)
    ref = s2s_reference(t.ref, state, **SMALL)
    src, tgt = digit_pairs(t.rng, 3, 5)
    tgt_in = torch.cat([torch.full((3, 1), BOS), tgt[:, :-1]], dim=1)
    for dtype in DTYPES:
        model = student_module(t, t.student.Seq2Seq, (S2S_VOCAB, 5, 6, 4), state, dtype)
        what = f"Seq2Seq(13, 5, 6, 4)(src (3, 5) padded, src_mask, tgt_in (3, 6), {name_of(dtype)})"
        logits, weights = parts(call_pure(model, src, src != PAD, tgt_in, what=what), 2, what)
        with torch.no_grad():
            expected_logits, expected_weights = ref(src, src != PAD, tgt_in)
        assert_shape(output(weights, None, what), (3, 6, 5), what + " attention weights")
        assert_module_close(weights, expected_weights, what + " attention weights", dtype)
        assert_module_close(logits, expected_logits, what + " logits", dtype)
    model = student_module(t, t.student.Seq2Seq, (S2S_VOCAB, 5, 6, 4), state, F64)
    properties.run_pure(t, "Seq2Seq(13, 5, 6, 4) in float64", model, ref, "src (3, 5) padded, src_mask, tgt_in (3, 6)",
                        (src, src != PAD, tgt_in))
    assert_param_grads(model, ref, [src, src != PAD, tgt_in], "Seq2Seq(13, 5, 6, 4)", rng=t.rng, output_index=0)
    properties.run_device(t, "Seq2Seq(13, 5, 6, 4)", student_module(t, t.student.Seq2Seq, (S2S_VOCAB, 5, 6, 4), state, F32),
                          "src (3, 5) padded, src_mask, tgt_in (3, 6)", (src, src != PAD, tgt_in))


# Pairs visited (properties.Reads): pair i's source is the one token DIGIT0 + i, so row DIGIT0 + i of the source
# embedding starts to move when pair i is first in a batch; Adam's moments keep it moving after that, so the rows
# that moved by step k are the pairs read by then. Until the first pass ends (then every row moves) they must be
# the reference's: the batches in order, the short last one included.
PAIRS_HINT = (" Take the batches in order: step k uses rows k * batch_size % N onwards (the short last batch too), "
              "so that one pass reads every pair.")


def s2s_reads(t, N: int, settings: dict, checkpoints: tuple) -> properties.Reads:
    """train_seq2seq's runs of each of `checkpoints` steps over N one-token pairs (`settings` without steps)."""
    V, dims = N + DIGIT0, dict(emb_dim=3, hidden_size=4, attn_size=3)
    weights = s2s_weights(t.ref, t.seed % 1000, vocab=V, **dims)
    src = torch.arange(DIGIT0, V)[:, None]  # (N, 1)
    tgt = torch.cat([src, torch.full_like(src, EOS)], dim=1)  # (N, 2): the one-digit string reversed, then </s>
    label = (f"Seq2Seq({V}, 3, 4, 3), {N} pairs whose sources are one token each (position i: pair i), "
             f"{spelled(settings)}, runs of {', '.join(map(str, checkpoints))} steps")
    models = (lambda: student_module(t, t.student.Seq2Seq, (V, *dims.values()), weights, F64),
              lambda: s2s_reference(t.ref, weights, vocab=V, **dims))
    return embedding_reads(t, "train_seq2seq", label, models, weights, "src_embedding.weight", (src, tgt), settings,
                           checkpoints, PAIRS_HINT, rows=slice(DIGIT0, None))


@check(8, 2, "train_seq2seq exact steps: one, two, and a third that wraps around to the first batch; pairs visited: "
             "every batch in order, the short last one too", uses=S2S_USES + ("train_seq2seq",),
       needs=S2S_NEEDS + ("clip_grad_norm",),
       hint="decoder inputs [BOS] + tgt[:, :-1]; cross-entropy with ignore_index=PAD (mean over real targets); "
            "Adam; clip_grad_norm(model.parameters(), clip); step k uses rows k*batch_size % N onwards.")
def train_seq2seq_exact(t):
    quiet = s2s_weights(t.ref, t.seed % 1000, **SMALL)
    loud = dict(quiet, **{"out.weight": quiet["out.weight"] * LOUD})
    src, tgt = digit_pairs(t.rng, 8, 5)
    for steps, clip, state in ((1, 1e6, quiet), (2, 1e6, quiet), (3, 0.2, quiet), (2, 0.2, loud)):
        settings = dict(steps=steps, lr=0.05, batch_size=4, clip=clip)
        what = (f"train_seq2seq(Seq2Seq(13, 5, 6, 4){' with logits of about a thousand' if state is loud else ''}, "
                f"src (8, 5), tgt (8, 6), {spelled(settings)})")
        model = student_module(t, t.student.Seq2Seq, (S2S_VOCAB, 5, 6, 4), state, F64)
        with library_advice(S2S_USES + ("train_seq2seq",)):  # no state carried between batches: generic advice
            losses = call_pure(t.student.train_seq2seq, model, src, tgt, what=what, **settings)
        ref = s2s_reference(t.ref, state, **SMALL)
        assert_same_steps(losses, model, ref, t.ref.train_seq2seq(ref, src, tgt, **settings), what)
    # the model on a non-CPU device, src and tgt on the CPU: the loop moves them, and makes its BOS column there
    model = student_module(t, t.student.Seq2Seq, (S2S_VOCAB, 5, 6, 4), quiet, F64)
    properties.run_device(t, "train_seq2seq", t.student.train_seq2seq, "Seq2Seq on the device, src and tgt on the CPU, "
                          "steps=2", (model, src, tgt), dict(steps=2, lr=0.05, batch_size=4, clip=1.0), move_data=False,
                          generator=True, **IN_FLOAT64)
    # 42 pairs in batches of 4: ten full batches, then a short one of 2 at step 11, the end of the first pass
    positions(t, "train_seq2seq", s2s_reads(t, 42, dict(lr=0.05, batch_size=4, clip=1.0), (1, 2, 5, 10, 11)))


GREEDY_S2S = dict(emb_dim=8, hidden_size=12, attn_size=8)


@one_thread()
def partly_trained_s2s(ref, seed: int) -> dict:
    """The reference Seq2Seq after 40 Adam steps on the toy task (about 0.5 s here).

    Why: a random model mostly repeats one token, or says </s> at once, whatever it is fed, so a decoder that
    leaves out the source mask, feeds <s> at every step, starts from zeros or stops every row at the first </s>
    would match its outputs. Half-trained, its outputs vary in length with the source and depend on the tokens fed
    back and on the real source positions.
    """
    state = s2s_weights(ref, seed, **GREEDY_S2S)
    model = s2s_reference(ref, state, F32, **GREEDY_S2S)
    src, tgt = digit_pairs(np.random.default_rng(seed), 40 * 16, 6)
    ref.train_seq2seq(model, src, tgt, steps=40, lr=0.03, batch_size=16, clip=1.0)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@check(8, 1, "greedy_translate: the reference's greedy outputs on a half-trained and a random model, rows of different "
             "lengths cut at </s> or at max_len", uses=S2S_USES + ("greedy_translate",), needs=S2S_NEEDS,
       hint="encode once; start every row from <s> and the encoder's final (h, c); at each of max_len steps call "
            "decode_step with the mask src != PAD and feed back each row's argmax; cut each row at its own first </s>.")
def greedy_translate_hidden(t):
    cases = [("a half-trained", partly_trained_s2s(t.ref, t.seed % 1000), GREEDY_S2S, (7, 4, 1)),
             ("a random", s2s_weights(t.ref, t.seed % 1000, **SMALL), SMALL, (5,))]
    src, _ = digit_pairs(t.rng, 8, 6)
    S, samples = properties.Sample, {"shapes": [], "edges": []}
    for label, state, dims, lengths in cases:  # rows of different lengths; max_len=0 is no step at all
        name = f"Seq2Seq(13, {', '.join(map(str, dims.values()))}) with {label} model's weights"
        both = properties.Both(student_module(t, t.student.Seq2Seq, (S2S_VOCAB, *dims.values()), state, F64),
                               s2s_reference(t.ref, state, **dims))
        samples["shapes"] += [S(f"{name}, src (8, 6) padded, max_len={n}", (both, src, n)) for n in lengths]
    samples["edges"] = [S(f"{name}, src (8, 6) padded, max_len=0", (both, src, 0)),
                        S(f"{name}, src (1, 6) (a batch of one), max_len=3", (both, src[:1], 3))]
    samples["device"] = [D(f"{name}, src (8, 6) padded, max_len=3", (both.student, src, 3), **IN_FLOAT64),
                         D(f"{name} on the device, src (8, 6) on the CPU (as callers keep it), max_len=3",
                           (both.student, src, 3), move_data=False, **IN_FLOAT64)]
    properties.run(t, properties.Graded("greedy_translate", t.student.greedy_translate, t.ref.greedy_translate, samples))


def q8_accuracy_of(module, rng, decoder=None) -> float:
    """Train module's Seq2Seq with module's train_seq2seq on fresh data; decode fresh sources with `decoder`'s
    Seq2Seq and greedy_translate holding the trained weights (the grader passes its reference), as the check does."""
    decoder = decoder or module
    state = s2s_weights(module, Q8_INIT_SEED, **Q8_MODEL)
    model = module.Seq2Seq(S2S_VOCAB, **Q8_MODEL)
    model.load_state_dict(state)
    src, tgt = digit_pairs(rng, Q8_SETTINGS["steps"] * Q8_SETTINGS["batch_size"])
    module.train_seq2seq(model, src, tgt, **Q8_SETTINGS)
    trained = decoder.Seq2Seq(S2S_VOCAB, **Q8_MODEL)
    trained.load_state_dict(model.state_dict())
    test_src, test_tgt = digit_pairs(rng, Q8_EVAL)
    return exact_match(decoder.greedy_translate(trained, test_src, S2S_MAX + 1), test_tgt)


@reference_result("q8-start")
def reference_q8_start(ref) -> dict:
    """How much of its start each matrix of the reference's Q8 training keeps (`start_profile`), from a fixed start."""
    return _q8_start(ref, repr(sorted(Q8_SETTINGS.items())))


@lru_cache(maxsize=4)
@one_thread()
def _q8_start(ref, settings_key: str) -> dict:
    state = s2s_weights(ref, Q8_INIT_SEED, **Q8_MODEL)
    model = s2s_reference(ref, state, F32, **Q8_MODEL)
    src, tgt = digit_pairs(np.random.default_rng(Q8_INIT_SEED), Q8_SETTINGS["steps"] * Q8_SETTINGS["batch_size"])
    ref.train_seq2seq(model, src, tgt, **Q8_SETTINGS)
    return start_profile(state, model.state_dict())


def exact_match(predicted, tgt) -> float:
    expected = [row[:row.index(EOS)] for row in tgt.tolist()]
    return sum(list(p) == e for p, e in zip(predicted, expected)) / len(expected)


@check(8, 3, f"reverse digit strings: your model trained by your train_seq2seq, exact match on {Q8_EVAL} fresh "
             f"examples the grader draws and decodes itself (at least {Q8_MIN_ACCURACY:.0%})", timeout=180,
       uses=S2S_USES + ("train_seq2seq",), needs=S2S_NEEDS + ("clip_grad_norm",))
def seq2seq_reversal(t):
    """Why the grader decodes: a greedy_translate that reverses its input by hand would otherwise score here.
    The trained weights are read back and run by the reference's Seq2Seq; the fresh examples never cross.
    As in Q7, the start is this submission's secret, the first steps from it are replayed, and the trained
    weights must keep its trace."""
    state = t.secret_state("initial weights", lambda: t.ref.Seq2Seq(S2S_VOCAB, **Q8_MODEL))
    src, tgt = digit_pairs(t.secret_rng("training pairs"), Q8_SETTINGS["steps"] * Q8_SETTINGS["batch_size"])
    what = (f"train_seq2seq(Seq2Seq(13, 16, 32, 24) holding the grader's initial weights, {len(src)} digit strings "
            f"and their reversals, {spelled(Q8_SETTINGS)})")
    sources, targets = t.student.put(src, "sources"), t.student.put(tgt, "targets")
    replay_first_steps(t, "train_seq2seq", student_module(t, t.student.Seq2Seq, (S2S_VOCAB, *Q8_MODEL.values()), state, F64),
                       (sources, targets), s2s_reference(t.ref, state, **Q8_MODEL), (src, tgt), Q8_SETTINGS, what,
                       S2S_USES + ("train_seq2seq",))
    model = student_module(t, t.student.Seq2Seq, (S2S_VOCAB, *Q8_MODEL.values()), state, F32)
    with library_advice(S2S_USES + ("train_seq2seq",)):
        losses = float_list(t.student.train_seq2seq(model, sources, targets, **Q8_SETTINGS), what, Q8_SETTINGS["steps"])
    if losses.shape != (Q8_SETTINGS["steps"],) or not np.isfinite(losses).all():
        raise CheckFailed(f"{what}: expected {Q8_SETTINGS['steps']} finite losses, got shape {losses.shape}")
    trained = checked_state(model.state_dict(), state, what)
    profile = t.cached("q8-start", lambda: reference_q8_start(t.ref))
    assert_descends(state, trained, profile, what, least=START_LEAST, mean=START_MEAN)
    grader_model = s2s_reference(t.ref, {k: v.float() for k, v in trained.items()}, F32, **Q8_MODEL)
    test_src, test_tgt = digit_pairs(t.secret_rng("held-out pairs"), Q8_EVAL)
    judge_q8(t, exact_match(t.ref.greedy_translate(grader_model, test_src, S2S_MAX + 1), test_tgt))


def judge_q8(t, accuracy: float) -> None:
    """Q8's verdict on the held-out exact match, in fixed words: the rule and its side, never the figure
    (it comes from weights the student's code chose, on held-out pairs: an oracle on them, issue 30)."""
    line = (f"Exact match of your trained weights (decoded by the grader) on {Q8_EVAL} fresh digit strings, against "
            f"the {Q8_MIN_ACCURACY:.0%} needed")
    if not accuracy >= Q8_MIN_ACCURACY:
        raise CheckFailed(line + ": below. Check the loss (padding ignored), the decoder inputs [<s>] + targets, and "
                                 "the attention mask.")
    t.publish("rnn_lm Q8: reversal exact match", accuracy, order="desc")  # TA-only by default
    t.note(line + ": reached.")
