"""Public checks for `transformer`: one small fixed case per question, to run and debug with.

Expected values are fixtures recorded from the reference by `lmgrade build` (`t.expected`), so
these checks run where the reference is not available. Float32 cases record the reference run in
float64, rounded once (`float32_of`), so the fixtures are the same on every CPU. Dims are distinct
(B != T != d != heads). Weights are made here by name, so a module whose attribute names differ from the starter's fails
with a clear `load_state_dict` message.
"""
import math

import numpy as np
import torch

from autograder.checks import check
from autograder.compare import assert_close, assert_equal
from autograder.errors import CheckFailed
from autograder.torch_checks import float32_of

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
    module.load_state_dict({k: v.to(dtype) for k, v in state.items()})
    module = module.double() if dtype == F64 else module.float()
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


# ---- one check per question --------------------------------------------------------------------
@check(1, 1, "LayerNorm and RMSNorm on a (2, 3, 5) input", public=True, uses=("LayerNorm", "RMSNorm"))
def public_norms(t):
    x = randn(t, 2, 3, 5, dtype=F32) + 2.0
    for name in ("LayerNorm", "RMSNorm"):
        shapes = norm_shapes("", 5, bias=name == "LayerNorm")
        state = {k.lstrip("."): v for k, v in fill(t.rng, shapes).items()}
        got = make_module(t, name, (5,), {}, state, F32)(x)
        expected = t.expected(name, lambda ref: float32_of(ref_module(ref, name, (5,), {}, state)(x.double())))
        assert_close(got, expected, f"{name}(5)(x (2, 3, 5))", rtol=1e-5, atol=1e-5)


@check(2, 1, "MLP and SwiGLU with d_model 6, d_ff 10", public=True, uses=("MLP", "SwiGLU"))
def public_feed_forward(t):
    x = randn(t, 2, 3, 6, dtype=F32)
    cases = {"MLP": mlp_shapes("", 6, 10),
             "SwiGLU": linear_shapes("gate", 6, 10, False) | linear_shapes("up", 6, 10, False)
             | linear_shapes("down", 10, 6, False)}
    for name, shapes in cases.items():
        state = {k.lstrip("."): v for k, v in fill(t.rng, shapes).items()}
        got = make_module(t, name, (6, 10), {}, state, F32)(x)
        expected = t.expected(name, lambda ref: float32_of(ref_module(ref, name, (6, 10), {}, state)(x.double())))
        assert_close(got, expected, f"{name}(6, 10)(x (2, 3, 6))", rtol=1e-5, atol=1e-5)


@check(3, 1, "a pre-norm causal Block(8, 2, 12) on x (2, 5, 8)", public=True,
       uses=("Block", "MultiHeadAttention", "LayerNorm", "MLP"))
def public_block(t):
    state, x = fill(t.rng, block_shapes("", 8, 12)), randn(t, 2, 5, 8, dtype=F32)
    got = make_module(t, "Block", (8, 2, 12), {}, state, F32)(x)
    expected = t.expected("out", lambda ref: float32_of(ref_module(ref, "Block", (8, 2, 12), {}, state)(x.double())))
    assert_close(got, expected, "Block(8, 2, 12)(x (2, 5, 8))", rtol=1e-4, atol=1e-4)


LM_CONFIG = dict(vocab_size=11, d_model=8, n_layers=2, n_heads=2, d_ff=12, max_len=9)


@check(4, 1, "TransformerLM logits (tied head, learned positions) and param_count", public=True,
       uses=("TransformerLM", "param_count", "Block", "MultiHeadAttention", "LayerNorm", "MLP"))
def public_lm(t):
    state = fill(t.rng, lm_shapes(**LM_CONFIG), tied=("tok_emb.weight", "head.weight"))
    idx = torch.from_numpy(t.rng.integers(0, 11, size=(2, 6)))
    got = make_module(t, "TransformerLM", (), LM_CONFIG, state, F32)(idx)
    expected = t.expected("logits", lambda ref: float32_of(ref_module(ref, "TransformerLM", (), LM_CONFIG, state)(idx)))
    assert_close(got, expected, "TransformerLM(vocab 11, d 8, 2 layers, 2 heads)(idx (2, 6))", rtol=1e-4, atol=1e-4)
    for tie in (True, False):
        cfg = dict(LM_CONFIG, tie_weights=tie)
        assert_equal(t.student.param_count(**cfg), t.expected(f"count{tie}", lambda ref: ref.param_count(**cfg)),
                     f"param_count({', '.join(f'{k}={v}' for k, v in cfg.items())})")


@check(5, 1, "adamw_step, lr_at and get_batch on small cases", public=True,
       uses=("adamw_step", "lr_at", "get_batch"))
def public_training_pieces(t):
    p, g = randn(t, 3, 4), randn(t, 3, 4)
    m, v = torch.zeros(3, 4, dtype=F64), torch.zeros(3, 4, dtype=F64)
    got = t.student.adamw_step(p, g, m, v, 1, 0.1, (0.9, 0.999), 1e-8, 0.1)
    expected = t.expected("adamw", lambda ref: ref.adamw_step(p, g, m, v, 1, 0.1, (0.9, 0.999), 1e-8, 0.1))
    for i, name in enumerate(("param", "m", "v")):
        assert_close(got[i], expected[i], f"adamw_step(p, g, zeros, zeros, step=1, lr=0.1, wd=0.1) {name}")
    steps = [0, 1, 4, 5, 10, 20, 25]
    got = [t.student.lr_at(s, 1.0, 5, 20, 0.1) for s in steps]
    assert_close(got, t.expected("lr", lambda ref: [ref.lr_at(s, 1.0, 5, 20, 0.1) for s in steps]),
                 f"lr_at(step, max_lr=1.0, warmup_steps=5, total_steps=20, min_lr=0.1) for step in {steps}")
    data = torch.arange(100, 130)
    x, y = t.student.get_batch(data, 4, 6, 0)
    if tuple(x.shape) != (4, 6) or tuple(y.shape) != (4, 6):
        raise CheckFailed(f"get_batch(data (30,), 4, 6, seed) should return two (4, 6) tensors, got "
                          f"{tuple(x.shape)} and {tuple(y.shape)}")
    assert_equal((y - x).tolist(), [[1] * 6] * 4, "get_batch on data = arange(100, 130): y - x (y is x shifted by one)")


@check(6, 1, "train_lm: one step from a given init on a constant stream", public=True,
       uses=("train_lm", "TransformerLM", "AdamW", "adamw_step", "lr_at", "clip_grads", "get_batch"))
def public_train_one_step(t):
    config = dict(vocab_size=7, d_model=8, n_layers=1, n_heads=2, d_ff=12, max_len=6)
    settings = dict(steps=1, batch_size=2, block_size=6, max_lr=0.01, min_lr=0.0, warmup_steps=2,
                    weight_decay=0.1, betas=(0.9, 0.99), eps=1e-4, grad_clip=0.5, seed=3)
    init = fill(t.rng, lm_shapes(**config), tied=("tok_emb.weight", "head.weight"))
    data = torch.full((40,), 3, dtype=torch.long)
    state, losses = t.student.train_lm(data, config, settings, init)
    expected = t.expected("state", lambda ref: train_in_float64(ref, data, config, settings, init))
    assert_close(losses, expected[1], "train_lm(...) losses after one step", rtol=1e-4, atol=1e-5)
    for name in ("tok_emb.weight", "blocks.0.attn.q_proj.weight", "norm_f.bias"):
        if name not in state:
            raise CheckFailed(f"train_lm's state_dict has no `{name}`; return model.state_dict()")
        assert_close(state[name], expected[0][name], f"train_lm(...) parameter {name} after one step",
                     rtol=1e-4, atol=1e-5)


@check(7, 1, "filter_logits (top-k, top-p) and one cached step", public=True,
       uses=("filter_logits", "TransformerLM", "MultiHeadAttention", "Block"))
def public_generation(t):
    logits = torch.log(torch.tensor([[0.5, 0.125, 0.25, 0.125]], dtype=F64))
    # top_p away from the cumulative masses 0.5, 0.75, 0.875: a fixture must not sit on a rounding boundary
    for kwargs in ({"top_k": 2}, {"top_p": 0.7}, {"top_p": 0.8}):
        got = t.student.filter_logits(logits, 1.0, **kwargs)
        keep = np.isfinite(np.asarray(got, dtype=np.float64))[0].tolist()
        assert_equal(keep, t.expected(str(kwargs), lambda ref: torch.isfinite(ref.filter_logits(logits, 1.0, **kwargs))[0].tolist()),
                     f"filter_logits(log([0.5, 0.125, 0.25, 0.125]), {kwargs}): which tokens are kept")
    state = fill(t.rng, lm_shapes(**LM_CONFIG), tied=("tok_emb.weight", "head.weight"))
    idx = torch.from_numpy(t.rng.integers(0, 11, size=(1, 5)))
    model = make_module(t, "TransformerLM", (), LM_CONFIG, state, F64)
    logits, cache = model(idx[:, :4], [])
    step, cache = model(idx[:, 4:], cache)
    expected = t.expected("full", lambda ref: ref_module(ref, "TransformerLM", (), LM_CONFIG, state)(idx)[:, 4:].detach())
    assert_close(step, expected, "TransformerLM: logits of token 5 from the cache of tokens 1-4, vs model(idx)",
                 rtol=1e-7, atol=1e-9)


@check(8, 1, "Seq2Seq(11, 8, 2, 12, 1, 9) logits on src (2, 7), tgt_in (2, 5)", public=True,
       uses=("Seq2Seq", "DecoderBlock", "Block", "MultiHeadAttention", "LayerNorm", "MLP"))
def public_seq2seq(t):
    args = (11, 8, 2, 12, 1, 9)
    state = fill(t.rng, seq2seq_shapes(*args))
    src, tgt = torch.from_numpy(t.rng.integers(0, 11, (2, 7))), torch.from_numpy(t.rng.integers(0, 11, (2, 5)))
    got = make_module(t, "Seq2Seq", args, {}, state, F32)(src, tgt)
    expected = t.expected("out", lambda ref: float32_of(ref_module(ref, "Seq2Seq", args, {}, state)(src, tgt)))
    assert_close(got, expected, "Seq2Seq(11, 8, 2, 12, 1, 9)(src (2, 7), tgt_in (2, 5))", rtol=1e-4, atol=1e-4)
