"""Public checks for `transformer`: one small fixed case per question, to run and debug with.

Expected values are fixtures recorded from the reference by `lmgrade build` (`t.expected`), so
these checks run where the reference is not available. Float32 cases record the reference run in
float64, rounded once (`float32_of`), so the fixtures are the same on every CPU. Dims are distinct
(B != T != d != heads). Weights are made here by name and loaded by parameter name (`load_weights`), so a
module whose attribute names differ from the starter's fails with a message naming the parameter.

Inputs are chosen for the commonest bugs: inputs far from 0 (a variance by E[x^2] - E[x]^2 cancels),
scores and logits of size 1000 (a softmax by hand overflows), 2-D and 4-D inputs (code written for
3-D only), float64 at float64 precision (a cast to float32 inside), lr=0.0, the last crop, a
confident model (a loss by log(softmax) is inf). Each stays a fraction of a second.
"""
import math

import numpy as np
import torch

from autograder.checking import properties
from autograder.checking.checks import check
from autograder.checking.compare import assert_close, assert_equal
from autograder.checking.purity import call_pure
from autograder.checking.remote import StudentError
from autograder.checking.torch_checks import float32_of, load_weights
from autograder.errors import CheckFailed

F32, F64 = torch.float32, torch.float64


# ---- weights by name (shared with the hidden checks, which load this file) --------------------
def norm_shapes(prefix, d, bias=True):
    return {f"{prefix}.weight": (d,), **({f"{prefix}.bias": (d,)} if bias else {})}


def linear_shapes(prefix, d_in, d_out, bias=True):
    return {f"{prefix}.weight": (d_out, d_in), **({f"{prefix}.bias": (d_out,)} if bias else {})}


def attention_shapes(prefix, d, bias=True):
    shapes = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        shapes |= linear_shapes(f"{prefix}.{name}", d, d, bias)
    return shapes


def mlp_shapes(prefix, d, d_ff, bias=True):
    return linear_shapes(f"{prefix}.fc", d, d_ff, bias) | linear_shapes(f"{prefix}.proj", d_ff, d, bias)


def block_shapes(prefix, d, d_ff, bias=True):
    p = f"{prefix}." if prefix else ""
    return (norm_shapes(p + "norm1", d, bias) | attention_shapes(p + "attn", d, bias) | norm_shapes(p + "norm2", d, bias)
            | mlp_shapes(p + "mlp", d, d_ff, bias))


def lm_shapes(vocab_size, d_model, n_layers, n_heads, d_ff, max_len, positions="learned", tie_weights=True,
              bias=True, post_norm=False):
    shapes = {"tok_emb.weight": (vocab_size, d_model)}
    if positions == "learned":
        shapes["pos_emb.weight"] = (max_len, d_model)
    for i in range(n_layers):
        shapes |= block_shapes(f"blocks.{i}", d_model, d_ff, bias)
    shapes |= norm_shapes("norm_f", d_model, bias) | {"head.weight": (vocab_size, d_model)}
    return shapes


def seq2seq_shapes(vocab_size, d_model, n_heads, d_ff, n_layers, max_len):
    shapes = {"emb.weight": (vocab_size, d_model), "pos_emb.weight": (max_len, d_model)}
    for i in range(n_layers):
        shapes |= block_shapes(f"encoder.{i}", d_model, d_ff)
    shapes |= norm_shapes("enc_norm", d_model)
    for i in range(n_layers):
        p = f"decoder.{i}"
        shapes |= (norm_shapes(f"{p}.norm1", d_model) | attention_shapes(f"{p}.self_attn", d_model)
                   | norm_shapes(f"{p}.norm2", d_model) | attention_shapes(f"{p}.cross_attn", d_model)
                   | norm_shapes(f"{p}.norm3", d_model) | mlp_shapes(f"{p}.mlp", d_model, d_ff))
    return shapes | norm_shapes("dec_norm", d_model)


def fill(rng, shapes: dict, tied: tuple = ()) -> dict:
    """float32 weights for every name: gains near 1, small biases, matrices scaled by 1/sqrt(fan_in).

    `tied` = (a, b): b gets the very values of a (a tied head saved under both names).
    """
    state = {}
    for name, shape in shapes.items():
        z = rng.standard_normal(shape)
        if len(shape) == 1:
            is_gain = name.endswith(".weight")
            z = 1.0 + 0.2 * z if is_gain else 0.2 * z
        elif "emb" in name:
            z = 0.5 * z
        else:
            z = z / math.sqrt(shape[1])
        state[name] = torch.from_numpy(z).to(F32)
    if tied:
        state[tied[1]] = state[tied[0]].clone()
    return state


def make_module(t, name: str, args: tuple, kwargs: dict, state: dict, dtype):
    """The student's class built in its process with the grader's weights, in `dtype`, on the grading device."""
    module = getattr(t.student, name)(*args, **kwargs)
    module = module.double() if dtype == F64 else module.float()  # cast first: float64 weights stay exact
    shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
    load_weights(t, module, {k: v.to(dtype) for k, v in state.items()}, f"{name}({shown})")
    return module.to(t.device)


def randn(t, *shape, dtype=F64, scale=1.0):
    return torch.from_numpy(t.rng.standard_normal(shape) * scale).to(dtype)


def ref_module(ref, name, args, kwargs, state, dtype=F64):
    module = getattr(ref, name)(*args, **kwargs)
    module.load_state_dict(state)
    return module.to(dtype)


def train_in_float64(ref, data, config, settings, init):
    """The reference's `train_lm` with float64 parameters, its state rounded once to float32 (a portable fixture)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(F64)
    try:
        state, losses = ref.train_lm(data, config, settings, init)
    finally:
        torch.set_default_dtype(previous)
    return float32_of(state), losses


def train_s2s_in_float64(ref, src, tgt, config, settings, init):
    """The reference's `train_seq2seq` with float64 parameters, its state rounded once to float32."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(F64)
    try:
        state = ref.train_seq2seq(src, tgt, config, settings, init)
    finally:
        torch.set_default_dtype(previous)
    return float32_of(state)


def confident(state: dict, gain: str) -> dict:
    """`state` with the final norm's gain times 300: logits of size 400, a model sure of its (mostly wrong) guesses.

    Why: there most targets get a probability below float32's smallest number, so a loss written as
    -log(softmax(logits)[target]) is inf, while F.cross_entropy (log-softmax) stays finite.
    """
    return {k: v * 300 if k == gain else v.clone() for k, v in state.items()}


LOSS_HINT = (" A loss written as -log(softmax(logits))[target] in two steps is inf once a target's probability "
             "underflows to 0 (a confident wrong prediction); F.cross_entropy (or log_softmax) computes the log "
             "of the softmax in one stable step.")


def assert_losses(value, expected: list, what: str) -> None:
    """train_lm's losses: Python floats, finite where the grader's are, equal to the grader's."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed(f"{what} should return (state_dict, losses)")
    losses = value[1]
    if not isinstance(losses, (list, tuple)) or not all(isinstance(x, float) for x in losses):
        kinds = sorted({type(x).__name__ for x in losses}) if isinstance(losses, (list, tuple)) else [
            type(losses).__name__]
        raise CheckFailed(f"{what}: the losses should be a list of Python floats (loss.item()), one per step; got "
                          f"{'a list of ' if isinstance(losses, (list, tuple)) else ''}{', '.join(kinds)}")
    if not all(math.isfinite(x) for x in losses) and all(math.isfinite(x) for x in expected):
        raise CheckFailed(f"{what}: losses {[round(x, 3) for x in losses]}, where the grader's are "
                          f"{[round(x, 3) for x in expected]}.{LOSS_HINT}")
    assert_close(list(losses), list(expected), f"{what}: losses", rtol=1e-4, atol=1e-5)


def training_pieces_first(t, what: str) -> None:
    """The Q5 pieces a training loop runs, checked on the spot, so a failure blames the piece, not the loop.

    Why: train_lm and train_seq2seq are compared with the grader's own update, which a wrong lr_at,
    adamw_step or clip_grads changes as surely as a wrong loop; the student should debug the piece.
    """
    steps = [0, 2, 3, 4, 6]
    got = [t.student.lr_at(s, 0.02, 3, 6, 0.002) for s in steps]
    expected = t.expected("pieces lr", lambda ref: [ref.lr_at(s, 0.02, 3, 6, 0.002) for s in steps])
    try:
        assert_close([float(g) for g in got], expected, "", rtol=1e-9, atol=1e-12)
    except (CheckFailed, TypeError):
        raise CheckFailed(f"{what} runs your lr_at (Q5), and lr_at(step, 0.02, 3, 6, 0.002) for step in {steps} "
                          f"gives {got}, where the stated schedule gives {[round(e, 8) for e in expected]}: fix lr_at "
                          "first (Q5's checks say more); your training loop may well be right.") from None
    p, g = torch.linspace(-1, 1, 6, dtype=F64), torch.linspace(0.5, -2, 6, dtype=F64)
    args = (p, g, torch.zeros(6, dtype=F64), torch.zeros(6, dtype=F64), 2, 0.01, (0.9, 0.95), 1e-4, 0.1)
    got = t.student.adamw_step(*args)
    expected = t.expected("pieces adamw", lambda ref: ref.adamw_step(*args))
    try:
        for i in range(3):
            assert_close(got[i], expected[i], "", rtol=1e-9, atol=1e-12)
    except (CheckFailed, TypeError, IndexError, KeyError):
        raise CheckFailed(f"{what} runs your adamw_step (Q5), which does not give AdamW's update (one step at t=2 "
                          "from zero moments, lr=0.01, betas=(0.9, 0.95), eps=1e-4, weight_decay=0.1): fix "
                          "adamw_step first (Q5's checks say more); your training loop may well be right.") from None
    grads = [torch.full((2, 3), 0.5, dtype=F64), torch.full((4,), -1.0, dtype=F64)]
    got = t.student.clip_grads(grads, 0.3)
    expected = t.expected("pieces clip", lambda ref: ref.clip_grads(grads, 0.3))
    try:
        assert_close(float(got[1]), float(expected[1]), "", rtol=1e-9)
        for a, b in zip(got[0], expected[0], strict=True):
            assert_close(a, b, "", rtol=1e-9, atol=1e-12)
    except (CheckFailed, TypeError, IndexError, ValueError):
        raise CheckFailed(f"{what} runs your clip_grads (Q5), which does not clip [a (2, 3) and a (4,) gradient] to "
                          "the global norm 0.3 as stated: fix clip_grads first (Q5's checks say more); your training "
                          "loop may well be right.") from None


# ---- one check per question --------------------------------------------------------------------
NORM_CASES = (  # (shape, dtype, offset, scale, eps, (rtol, atol)): 3-D, 2-D with another eps, 4-D in float64, far from 0
    ((2, 3, 5), F32, 2.0, 1.0, None, (1e-5, 1e-5)),
    ((4, 5), F32, 0.0, 1.0, 1e-2, (1e-5, 1e-5)),
    ((2, 2, 3, 5), F64, 0.0, 2.0, None, (1e-10, 1e-12)),  # float64 precision: a cast to float32 inside shows
    ((6, 5), F32, 1000.0, 1.0, None, (1e-3, 1e-3)),  # float32 keeps 1e-4 here; E[x^2] - E[x]^2 loses 1e-1
)


@check(1, 1, "LayerNorm and RMSNorm on 2-D to 4-D inputs, another eps, float64, and x = 1000 + noise", public=True,
       uses=("LayerNorm", "RMSNorm"))
def public_norms(t):
    for i, (shape, dtype, offset, scale, eps, (rtol, atol)) in enumerate(NORM_CASES):
        x = (randn(t, *shape) * scale + offset).to(dtype)
        kwargs = {} if eps is None else {"eps": eps}
        for name in ("LayerNorm", "RMSNorm"):
            shapes = norm_shapes("", 5, bias=name == "LayerNorm")
            state = {k.lstrip("."): v for k, v in fill(t.rng, shapes).items()}
            what = (f"{name}(5{', eps=' + str(eps) if eps else ''})(x {shape}{f', {offset:g} + noise' if offset else ''}, "
                    f"{str(dtype).removeprefix('torch.')})")
            got = call_pure(make_module(t, name, (5,), kwargs, state, dtype), x, what=what)
            expected = t.expected(f"{name}{i}", lambda ref: float32_of(ref_module(ref, name, (5,), kwargs, state)(x.double()))
                                  if dtype == F32 else ref_module(ref, name, (5,), kwargs, state)(x).detach())
            if isinstance(got, torch.Tensor) and got.dtype != dtype:
                raise CheckFailed(f"{what}: the output is {str(got.dtype).removeprefix('torch.')}; keep the input's "
                                  "dtype (float64 in, float64 out; never cast to float32 inside a module)")
            try:
                assert_close(got, expected, what, rtol=rtol, atol=atol)
            except CheckFailed as exc:
                why = (" Far from 0, a variance by E[x**2] - E[x]**2 cancels catastrophically in float32: compute the "
                       "mean, then the mean of (x - mean)**2." if offset else
                       " In float64 the result must be exact to float64 precision: is something computed in float32 "
                       "inside (a .float(), a cast to float32 and back)? Float64 in, float64 out." if dtype == F64 else "")
                raise CheckFailed(f"{exc}{why}") from None


@check(2, 1, "MLP and SwiGLU with d_model 6, d_ff 10; finite output and gradients at inputs of size 1000", public=True,
       uses=("MLP", "SwiGLU"))
def public_feed_forward(t):
    x = randn(t, 2, 3, 6, dtype=F32)
    cases = {"MLP": mlp_shapes("", 6, 10),
             "SwiGLU": linear_shapes("gate", 6, 10, False) | linear_shapes("up", 6, 10, False)
             | linear_shapes("down", 10, 6, False)}
    for name, shapes in cases.items():
        state = {k.lstrip("."): v for k, v in fill(t.rng, shapes).items()}
        module = make_module(t, name, (6, 10), {}, state, F32)
        got = call_pure(module, x, what=f"{name}(6, 10)(x (2, 3, 6))")
        expected = t.expected(name, lambda ref: float32_of(ref_module(ref, name, (6, 10), {}, state)(x.double())))
        assert_close(got, expected, f"{name}(6, 10)(x (2, 3, 6))", rtol=1e-5, atol=1e-5)
        properties.run_generator(t, f"{name}(6, 10)", module, "x (2, 3, 6)", (x,))
        finite_at_scale(make_module(t, name, (6, 10), {}, state, F64), f"{name}(6, 10)", x.double() * 1000.0)


def finite_at_scale(module, name: str, x) -> None:
    """At hidden pre-activations of hundreds to thousands (both signs), the output and the gradients w.r.t. x and
    every weight are finite: a SiLU or sigmoid written with exp overflows there (inf / inf, 0 * inf)."""
    what = f"{name}(x (2, 3, 6) of N(0, 1000**2), float64)"
    hint = (": at pre-activations this large exp overflows (exp(800) is inf, and inf / inf is NaN, forward or "
            "backward); use F.silu, torch.sigmoid, F.gelu.")
    out = call_pure(module, x, what=what)
    if not isinstance(out, torch.Tensor) or not bool(torch.isfinite(out).all()):
        raise CheckFailed(f"{what}: NaN or inf in the output{hint}")
    try:
        grads = module.vjp([x], [0], torch.ones(x.shape, dtype=F64))
    except StudentError as exc:
        line = str(exc).strip().splitlines()[-1][:200]
        raise CheckFailed(f"backward through {what} raised an error ({line})") from None
    tensors = list(grads.get("input_grads") or []) + list((grads.get("param_grads") or {}).values())
    if not tensors or not all(isinstance(g, torch.Tensor) and bool(torch.isfinite(g).all()) for g in tensors):
        raise CheckFailed(f"{what}: NaN or inf in the gradients w.r.t. x or a weight{hint}")


@check(3, 1, "apply_rope, MultiHeadAttention with RoPE at scores of size 1000, and a pre-norm causal Block(8, 2, 12)",
       public=True, uses=("Block", "MultiHeadAttention", "apply_rope", "LayerNorm", "MLP"))
def public_block(t):
    x = randn(t, 2, 3, 5, 4)
    for positions, base in ((torch.arange(5), 10000.0), (torch.tensor([3, 0, 7, 1, 2]), 100.0)):
        what = f"apply_rope(x (2, 3, 5, 4), positions={positions.tolist()}, base={base})"
        got = call_pure(t.student.apply_rope, x, positions, base, what=what)
        assert_close(got, t.expected(f"rope{base}", lambda ref: ref.apply_rope(x, positions, base)), what,
                     rtol=1e-7, atol=1e-9)
    properties.run_generator(t, "apply_rope", t.student.apply_rope, "x (2, 3, 5, 4), positions 0..4",
                             (x, torch.arange(5)))
    state = {k.lstrip("."): v for k, v in fill(t.rng, attention_shapes("", 8)).items()}
    x = randn(t, 2, 5, 8, scale=40.0)
    what = "MultiHeadAttention(8, 2, rope=True)(x (2, 5, 8) with entries of size 40, causal=True, float64)"
    attention = make_module(t, "MultiHeadAttention", (8, 2), {"rope": True}, state, F64)
    got = call_pure(attention, x, None, True, what=what)
    expected = t.expected("attention", lambda ref: ref_module(ref, "MultiHeadAttention", (8, 2), {"rope": True}, state)(
        x, None, True).detach())
    if isinstance(got, torch.Tensor) and not bool(torch.isfinite(got).all()):
        raise CheckFailed(f"{what}: NaN or inf in the output: a softmax by hand, exp(scores) / sum, overflows at "
                          "scores of size 1000; use torch.softmax (or subtract each row's maximum first).")
    assert_close(got, expected, what, rtol=1e-7, atol=1e-9)
    properties.run_generator(t, "MultiHeadAttention(8, 2, rope=True)", attention, "x (2, 5, 8), causal=True",
                             (x, None, True))
    state, x = fill(t.rng, block_shapes("", 8, 12)), randn(t, 2, 5, 8, dtype=F32)
    block = make_module(t, "Block", (8, 2, 12), {}, state, F32)
    got = call_pure(block, x, what="Block(8, 2, 12)(x (2, 5, 8))")
    expected = t.expected("out", lambda ref: float32_of(ref_module(ref, "Block", (8, 2, 12), {}, state)(x.double())))
    assert_close(got, expected, "Block(8, 2, 12)(x (2, 5, 8))", rtol=1e-4, atol=1e-4)
    properties.run_generator(t, "Block(8, 2, 12)", block, "x (2, 5, 8)", (x,))


LM_CONFIG = dict(vocab_size=11, d_model=8, n_layers=2, n_heads=2, d_ff=12, max_len=9)


@check(4, 1, "TransformerLM logits (tied head, learned positions) and param_count (tied, untied, RoPE without biases)",
       public=True, uses=("TransformerLM", "param_count", "Block", "MultiHeadAttention", "LayerNorm", "MLP"))
def public_lm(t):
    state = fill(t.rng, lm_shapes(**LM_CONFIG), tied=("tok_emb.weight", "head.weight"))
    idx = torch.from_numpy(t.rng.integers(0, 11, size=(2, 6)))
    got = make_module(t, "TransformerLM", (), LM_CONFIG, state, F32)(idx)
    expected = t.expected("logits", lambda ref: float32_of(ref_module(ref, "TransformerLM", (), LM_CONFIG, state)(idx)))
    assert_close(got, expected, "TransformerLM(vocab 11, d 8, 2 layers, 2 heads)(idx (2, 6))", rtol=1e-4, atol=1e-4)
    for key, cfg in (("countTrue", dict(LM_CONFIG, tie_weights=True)), ("countFalse", dict(LM_CONFIG, tie_weights=False)),
                     ("rope", dict(LM_CONFIG, positions="rope", bias=False, post_norm=True))):
        what = f"param_count({', '.join(f'{k}={v!r}' for k, v in cfg.items())})"
        got = t.student.param_count(**cfg)
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise CheckFailed(f"{what} should return an int, got {type(got).__name__}")
        assert_equal(int(got), t.expected(key, lambda ref: ref.param_count(**cfg)), what)


@check(5, 1, "adamw_step, AdamW (step(lr), step(lr=0.0)), lr_at, clip_grads and get_batch on small cases", public=True,
       uses=("adamw_step", "AdamW", "lr_at", "clip_grads", "get_batch"))
def public_training_pieces(t):
    for label, scale in (("", 1.0), (" with gradients of size 1e-7 (where eps shows)", 1e-7)):
        p, g = randn(t, 3, 4), randn(t, 3, 4, scale=scale)
        m, v = torch.zeros(3, 4, dtype=F64), torch.zeros(3, 4, dtype=F64)
        got = call_pure(t.student.adamw_step, p, g, m, v, 1, 0.1, (0.9, 0.999), 1e-8, 0.1, what="adamw_step")
        expected = t.expected(f"adamw{scale}", lambda ref: ref.adamw_step(p, g, m, v, 1, 0.1, (0.9, 0.999), 1e-8, 0.1))
        for i, name in enumerate(("param", "m", "v")):
            assert_close(got[i], expected[i], f"adamw_step(p, g, zeros, zeros, step=1, lr=0.1, wd=0.1){label}: {name}")
    public_adamw_class(t)
    steps = [0, 1, 4, 5, 10, 20, 25]
    got = [t.student.lr_at(s, 1.0, 5, 20, 0.1) for s in steps]
    assert_close(got, t.expected("lr", lambda ref: [ref.lr_at(s, 1.0, 5, 20, 0.1) for s in steps]),
                 f"lr_at(step, max_lr=1.0, warmup_steps=5, total_steps=20, min_lr=0.1) for step in {steps}")
    grads = [randn(t, 3, 4, scale=2.0), randn(t, 5)]
    what = "clip_grads([a (3, 4) and a (5,) gradient, global norm above 1], 1.0)"
    clipped, norm = call_pure(t.student.clip_grads, grads, 1.0, what=what)
    expected = t.expected("clip", lambda ref: ref.clip_grads(grads, 1.0))
    if isinstance(norm, bool) or not isinstance(norm, float):
        raise CheckFailed(f"{what}: the norm should be a Python float, got a {type(norm).__name__}; return float(total)")
    assert_close(norm, expected[1], f"{what}: the norm before clipping")
    for i, (a, b) in enumerate(zip(clipped, expected[0])):
        assert_close(a, b, f"{what}: gradient {i} (one factor for all, from the global norm)")
    data = torch.arange(100, 130)
    x, y = t.student.get_batch(data, 4, 6, 0)
    if tuple(x.shape) != (4, 6) or tuple(y.shape) != (4, 6):
        raise CheckFailed(f"get_batch(data (30,), 4, 6, seed) should return two (4, 6) tensors, got "
                          f"{tuple(x.shape)} and {tuple(y.shape)}")
    assert_equal((y - x).tolist(), [[1] * 6] * 4, "get_batch on data = arange(100, 130): y - x (y is x shifted by one)")
    x, _ = t.student.get_batch(torch.arange(20), 300, 17, 11)
    assert_equal(sorted(set(x[:, 0].tolist())), [0, 1, 2], "get_batch(arange(20), 300, 17, seed 11): the starts drawn "
                 "(with 20 tokens and block_size 17, the crops starting at 0, 1 and 2 all have a next token)")
    # the generator property on calls made above: a deterministic step, clipping and crops drawn from `seed` alone
    # leave torch's (and numpy's, Python's) global generators where the grader put them
    properties.run_generator(t, "adamw_step", t.student.adamw_step, "p, g, zeros, zeros, step=1, lr=0.1, wd=0.1",
                             (p, g, m, v, 1, 0.1, (0.9, 0.999), 1e-8, 0.1))
    properties.run_generator(t, "clip_grads", t.student.clip_grads, "a (3, 4) and a (5,) gradient, 1.0", (grads, 1.0))
    properties.run_generator(t, "get_batch", t.student.get_batch, "data (30,), 4, 6, seed 0", (data, 4, 6, 0))


def public_adamw_class(t):
    """AdamW over three tensors held in the student's process: step(), step(0.05), step(lr=0.0), step()."""
    params = [randn(t, 2, 3), randn(t, 2, 3), randn(t, 4)]  # one shape twice (a shared state shows); the last: no grad
    grads = [[randn(t, 2, 3), randn(t, 2, 3, scale=3.0)] for _ in range(4)]
    lrs = (None, 0.05, 0.0, None)
    handles = [t.student.put(p.clone().requires_grad_(True), f"parameter {i}") for i, p in enumerate(params)]
    opt = t.student.AdamW(handles, lr=0.03, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.2)

    def truth(ref):
        leaves = [p.clone().requires_grad_(True) for p in params]
        adamw = torch.optim.AdamW(leaves, lr=0.03, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.2)
        history = []
        for lr, gs in zip(lrs, grads):
            for leaf, g in zip(leaves, gs):
                leaf.grad = g.clone()
            adamw.param_groups[0]["lr"] = 0.03 if lr is None else lr
            adamw.step()
            adamw.zero_grad()
            history.append([leaf.detach().clone() for leaf in leaves])
        return history

    expected = t.expected("AdamW", truth)
    done = []
    for number, (lr, gs) in enumerate(zip(lrs, grads)):
        for handle, g in zip(handles, gs):
            handle.backward(g)
        if lr is None:
            opt.step()
        elif number == 1:
            opt.step(lr)
        else:
            opt.step(lr=lr)
        opt.zero_grad()
        done.append("step()" if lr is None else f"step({lr})" if number == 1 else f"step(lr={lr})")
        for i, handle in enumerate(handles):
            what = (f"AdamW(3 tensors, lr=0.03, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.2), then {', '.join(done)} "
                    f"(fresh gradients on tensors 0 and 1 each time; tensor 2 never has one): tensor {i}")
            got = handle.get()
            assert_close(got.detach() if isinstance(got, torch.Tensor) else got, expected[number][i], what + (" (lr=0.0 is a learning rate of zero, not "
                         "'no lr given': test `lr is None`)" if lr == 0.0 else ""))
    for handle, g in zip(handles, grads[0]):
        handle.backward(g)
    properties.run_generator(t, "AdamW.step", opt.step, "a fifth step() with fresh gradients", ())


@check(6, 1, "train_lm: three steps on varied ids and one from a confident init, from a given init_state", public=True,
       uses=("train_lm", "TransformerLM", "AdamW", "adamw_step", "lr_at", "clip_grads", "get_batch"))
def public_train_one_step(t):
    training_pieces_first(t, "train_lm")
    config = dict(vocab_size=7, d_model=8, n_layers=1, n_heads=2, d_ff=12, max_len=6)
    settings = dict(batch_size=2, block_size=6, max_lr=0.01, min_lr=0.0, warmup_steps=2,
                    weight_decay=0.1, betas=(0.9, 0.99), eps=1e-4, grad_clip=0.5, seed=3)
    init = fill(t.rng, lm_shapes(**config), tied=("tok_emb.weight", "head.weight"))
    data = torch.from_numpy(t.rng.integers(0, 7, size=40))
    for key, start, steps in (("state", init, 3), ("confident", confident(init, "norm_f.weight"), 1)):
        what = f"train_lm(ids (40,), {', '.join(f'{k}={v}' for k, v in config.items())}, steps={steps}, init_state=given)"
        if start is not init:
            what += " (a confident init_state: logits of size 400)"
        cfg = dict(settings, steps=steps)
        value = t.student.train_lm(data, config, cfg, start)
        expected = t.expected(key, lambda ref: train_in_float64(ref, data, config, cfg, start))
        assert_losses(value, expected[1], what)
        state = value[0]
        for name in ("tok_emb.weight", "blocks.0.attn.q_proj.weight", "norm_f.bias"):
            if not isinstance(state, dict) or name not in state:
                raise CheckFailed(f"train_lm's state_dict has no `{name}`; return model.state_dict()")
            assert_close(state[name], expected[0][name], f"{what}: parameter {name} after {steps} step(s)",
                         rtol=1e-4, atol=1e-5)


@check(7, 1, "filter_logits (top-k ties, top-p after top-k, logits of size 1000), one cached step, and generate "
             "(greedy with and without the cache, top_k=1, temperature 1e-4; sampling: both paths give the same "
             "tokens for one seed)", public=True,
       uses=("filter_logits", "generate", "TransformerLM", "MultiHeadAttention", "Block"))
def public_generation(t):
    logits = torch.log(torch.tensor([[0.5, 0.125, 0.25, 0.125]], dtype=F64))
    # top_p away from the cumulative masses 0.5, 0.75, 0.875: a fixture must not sit on a rounding boundary
    for shift, kwargs in ((0, {"top_k": 2}), (0, {"top_p": 0.7}), (0, {"top_p": 0.8}), (0, {"top_k": 3}),
                          (0, {"top_k": 2, "top_p": 0.6}), (1000, {"top_p": 0.8}), (800, {"temperature": 0.5, "top_p": 0.7})):
        z = logits + shift
        temperature = kwargs.pop("temperature", 1.0)
        shown = f"filter_logits(log([0.5, 0.125, 0.25, 0.125]){f' + {shift}' if shift else ''}, {temperature}, {kwargs})"
        got = call_pure(t.student.filter_logits, z, temperature, what=shown, **kwargs)
        keep = np.isfinite(np.asarray(got, dtype=np.float64))[0].tolist()
        expected = t.expected(f"{shift}{kwargs}", lambda ref: torch.isfinite(ref.filter_logits(z, temperature, **kwargs))[0].tolist())
        if keep != expected and shift:
            raise CheckFailed(f"{shown}: kept {keep}, expected {expected}: a softmax by hand overflows at logits of "
                              "size 1000 (exp(1000) is inf); use torch.softmax.")
        assert_equal(keep, expected, f"{shown}: which tokens are kept (top-k keeps ties at the k-th value; "
                     "top-p reads the softmax of what top-k left)")
    state = fill(t.rng, lm_shapes(**LM_CONFIG), tied=("tok_emb.weight", "head.weight"))
    idx = torch.from_numpy(t.rng.integers(0, 11, size=(1, 5)))
    model = make_module(t, "TransformerLM", (), LM_CONFIG, state, F64)
    logits, cache = model(idx[:, :4], [])
    step, cache = model(idx[:, 4:], cache)
    expected = t.expected("full", lambda ref: ref_module(ref, "TransformerLM", (), LM_CONFIG, state)(idx)[:, 4:].detach())
    assert_close(step, expected, "TransformerLM: logits of token 5 from the cache of tokens 1-4, vs model(idx)",
                 rtol=1e-7, atol=1e-9)
    prompt = torch.from_numpy(t.rng.integers(0, 11, size=(3, 2)))
    greedy = t.expected("greedy", lambda ref: ref.generate(ref_module(ref, "TransformerLM", (), LM_CONFIG, state), prompt,
                                                            6, 0.0).tolist())
    for kwargs in ({"temperature": 0.0}, {"temperature": 0.0, "use_cache": False}, {"temperature": 1.0, "top_k": 1},
                   {"temperature": 1e-4}):
        what = f"generate(model, idx (3, 2), 6, {', '.join(f'{k}={v}' for k, v in kwargs.items())}, seed=1)"
        got = t.student.generate(model, prompt, 6, seed=1, **kwargs)
        if not isinstance(got, torch.Tensor) or got.dtype != torch.int64:
            raise CheckFailed(f"{what} should return an int64 tensor")
        assert_equal(got.tolist(), greedy, f"{what} (each of these is greedy decoding: sampling with top_k=1, or "
                     "at temperature 1e-4, where softmax(logits / T) puts all its mass on the largest logit and "
                     "exp(logits / T) by hand overflows)")
    # sampling: the path without the cache draws from the same filtered distribution with the same generator, so the
    # same seed gives the same tokens both ways (and the no-cache path leaves torch's global generator alone)
    sampling = dict(temperature=0.9, top_k=3, seed=2)
    properties.run_generator(t, "generate", t.student.generate, "model, idx (3, 2), 6, temperature=0.9, top_k=3, "
                             "seed=2, use_cache=False", (model, prompt, 6), dict(sampling, use_cache=False))
    paths = [t.student.generate(model, prompt, 6, use_cache=use_cache, **sampling) for use_cache in (True, False)]
    if not all(isinstance(p, torch.Tensor) for p in paths) or paths[0].tolist() != paths[1].tolist():
        raise CheckFailed("generate(model, idx (3, 2), 6, temperature=0.9, top_k=3, seed=2) with use_cache=True and "
                          "use_cache=False gave different tokens: both paths must sample from softmax(filter_logits(logits, "
                          "temperature, top_k, top_p)) with the one generator made from `seed`.")
    # on a non-CPU device (a simulated accelerator with real values): the generator, masks and tokens made there
    properties.run_device(t, "generate", t.student.generate, "model, idx (3, 2), 6, temperature=0.9, top_k=3, seed=2",
                          (model, prompt, 6), sampling, follows_dtype=False)


S2S_PUBLIC = dict(vocab_size=11, d_model=8, n_heads=2, d_ff=12, n_layers=1, max_len=9)


@check(8, 1, "Seq2Seq(11, 8, 2, 12, 1, 9) logits on src (2, 7), tgt_in (2, 5), and greedy_decode", public=True,
       uses=("Seq2Seq", "DecoderBlock", "Block", "MultiHeadAttention", "LayerNorm", "MLP", "greedy_decode"))
def public_seq2seq(t):
    args = (11, 8, 2, 12, 1, 9)
    state = fill(t.rng, seq2seq_shapes(*args))
    src, tgt = torch.from_numpy(t.rng.integers(0, 11, (2, 7))), torch.from_numpy(t.rng.integers(0, 11, (2, 5)))
    seq2seq = make_module(t, "Seq2Seq", args, {}, state, F32)
    got = call_pure(seq2seq, src, tgt, what="Seq2Seq(11, 8, 2, 12, 1, 9)(src (2, 7), tgt_in (2, 5))")
    expected = t.expected("out", lambda ref: float32_of(ref_module(ref, "Seq2Seq", args, {}, state)(src, tgt)))
    assert_close(got, expected, "Seq2Seq(11, 8, 2, 12, 1, 9)(src (2, 7), tgt_in (2, 5))", rtol=1e-4, atol=1e-4)
    properties.run_generator(t, "Seq2Seq(11, 8, 2, 12, 1, 9)", seq2seq, "src (2, 7), tgt_in (2, 5)", (src, tgt))
    model = make_module(t, "Seq2Seq", args, {}, state, F64)
    got = call_pure(t.student.greedy_decode, model, src, 6, 10, what="greedy_decode(model, src (2, 7), 6, bos=10)")
    expected = t.expected("greedy", lambda ref: ref.greedy_decode(ref_module(ref, "Seq2Seq", args, {}, state), src, 6,
                                                                  10).tolist())
    if not isinstance(got, torch.Tensor) or got.dtype != torch.int64:
        raise CheckFailed("greedy_decode(model, src (2, 7), 6, bos=10) should return an int64 tensor")
    assert_equal(got.tolist(), expected, "greedy_decode(model, src (2, 7), 6, bos=10) (the decoder sees [BOS] and "
                 "every token chosen so far at each step)")
    properties.run_generator(t, "greedy_decode", t.student.greedy_decode, "Seq2Seq, src (2, 7), 6, bos=10",
                             (model, src, 6, 10))


@check(8, 1, "train_seq2seq: two steps from a given init_state and one from a confident one", public=True,
       uses=("train_seq2seq", "Seq2Seq", "DecoderBlock", "AdamW", "adamw_step", "lr_at", "clip_grads"))
def public_seq2seq_train(t):
    training_pieces_first(t, "train_seq2seq")
    settings = dict(batch_size=3, max_lr=0.02, min_lr=0.002, warmup_steps=2, weight_decay=0.1, betas=(0.9, 0.95),
                    eps=1e-4, grad_clip=0.3, seed=4, bos=10)
    init = fill(t.rng, seq2seq_shapes(*S2S_PUBLIC.values()))
    src, tgt = torch.from_numpy(t.rng.integers(0, 10, (6, 5))), torch.from_numpy(t.rng.integers(0, 10, (6, 4)))
    for key, start, steps in (("state", init, 2), ("confident", confident(init, "dec_norm.weight"), 1)):
        what = (f"train_seq2seq(src (6, 5), tgt (6, 4), {', '.join(f'{k}={v}' for k, v in S2S_PUBLIC.items())}, "
                f"steps={steps}, init_state=given{', a confident one: logits of size 400' if start is not init else ''})")
        cfg = dict(settings, steps=steps)
        state = t.student.train_seq2seq(src, tgt, S2S_PUBLIC, cfg, start)
        expected = t.expected(key, lambda ref: train_s2s_in_float64(ref, src, tgt, S2S_PUBLIC, cfg, start))
        for name in ("emb.weight", "decoder.0.cross_attn.q_proj.weight", "encoder.0.mlp.fc.bias", "dec_norm.bias"):
            if not isinstance(state, dict) or name not in state:
                raise CheckFailed(f"{what}: the returned state_dict has no `{name}`; return model.state_dict()")
            value = state[name]
            if isinstance(value, torch.Tensor) and not bool(torch.isfinite(value).all()):
                raise CheckFailed(f"{what}: parameter {name} has NaN or inf after training.{LOSS_HINT}")
            assert_close(value, expected[name], f"{what}: parameter {name} after {steps} step(s)", rtol=1e-4, atol=1e-5)
