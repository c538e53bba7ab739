"""Public checks for `rnn_lm`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: fixtures recorded from the reference by `lmgrade build`,
in float64 and rounded once (`float32_of`) where the check runs in float32, so they are the same on every CPU.
Dims are distinct (B != T != d != H), and each input is chosen to show the commonest bug of its
question: an initial state that is not zero (a layer that ignores h0), gates in PyTorch's order,
padding in the loss, a short last chunk, clipping that needs the global norm, a table where greedy
and the best sequence differ.
"""
import torch

from autograder.checks import check
from autograder.compare import as_array, assert_close, assert_equal
from autograder.errors import CheckFailed
from autograder.torch_checks import float32_of, output, randn

F32, F64 = torch.float32, torch.float64


def weights(t, gates: int, d: int, H: int, prefix: str = "") -> dict:
    return {f"{prefix}weight_ih": randn(t, gates * H, d, dtype=F32, scale=H ** -0.5),
            f"{prefix}weight_hh": randn(t, gates * H, H, dtype=F32, scale=H ** -0.5),
            f"{prefix}bias_ih": randn(t, gates * H, dtype=F32, scale=0.3),
            f"{prefix}bias_hh": randn(t, gates * H, dtype=F32, scale=0.3)}


def module(t, cls, args: tuple, state: dict, dtype=F32, **kwargs):
    m = cls(*args, **kwargs)
    m.load_state_dict(state)
    return (m.double() if dtype == F64 else m.float()).to(t.device)


def reference(cls, state: dict, dtype=F32):
    cls.load_state_dict(state)
    return cls.to(dtype)


def pair(value, what: str) -> list:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed(f"{what} should return a pair, got {type(value).__name__}")
    return list(value)


@check(1, 1, "RNNLayer on a small batch with an initial state", public=True, uses=("RNNCell", "RNNLayer"))
def public_rnn(t):
    w, x, h0 = weights(t, 1, 4, 5, "cell."), randn(t, 2, 3, 4, dtype=F32), randn(t, 2, 5, dtype=F32)
    got = pair(module(t, t.student.RNNLayer, (4, 5), w)(x, h0), "RNNLayer(4, 5)(x (2, 3, 4), h0 (2, 5))")
    expected = t.expected("out", lambda ref: float32_of(reference(ref.RNNLayer(4, 5), w, F64)(x.double(), h0.double())))
    assert_close(got[0], expected[0], "RNNLayer(4, 5)(x (2, 3, 4), h0 (2, 5)) outputs", rtol=1e-5, atol=1e-5)
    assert_close(got[1], expected[1], "RNNLayer(4, 5)(x (2, 3, 4), h0 (2, 5)) last state", rtol=1e-5, atol=1e-5)


@check(2, 1, "LSTMLayer on a small batch with an initial (h, c)", public=True, uses=("LSTMCell", "LSTMLayer"))
def public_lstm(t):
    w, x = weights(t, 4, 4, 3, "cell."), randn(t, 2, 5, 4, dtype=F32)
    state = (randn(t, 2, 3, dtype=F32), randn(t, 2, 3, dtype=F32))
    what = "LSTMLayer(4, 3)(x (2, 5, 4), (h0, c0) (2, 3))"
    out, (h, c) = pair(module(t, t.student.LSTMLayer, (4, 3), w)(x, state), what)
    expected = t.expected("out", lambda ref: float32_of(reference(ref.LSTMLayer(4, 3), w, F64)(
        x.double(), tuple(s.double() for s in state))))
    assert_close(out, expected[0], what + " outputs", rtol=1e-5, atol=1e-5)
    assert_close(h, expected[1][0], what + " h_T", rtol=1e-5, atol=1e-5)
    assert_close(c, expected[1][1], what + " c_T", rtol=1e-5, atol=1e-5)


@check(3, 1, "RNNLM logits, and lm_loss on a padded batch", public=True, uses=("RNNLM", "lm_loss"),
       needs=("LSTMCell", "LSTMLayer"))
def public_rnnlm(t):
    V, E, H = 7, 4, 3
    w = {"embedding.weight": randn(t, V, E, dtype=F32), **weights(t, 4, E, H, "rnn.cell."),
         "proj.weight": randn(t, V, H, dtype=F32), "proj.bias": randn(t, V, dtype=F32, scale=0.1)}
    tokens = torch.tensor([[1, 4, 6, 2, 3], [5, 2, 0, 0, 0]])
    lm = module(t, t.student.RNNLM, (V, E, H), w)
    expected = t.expected("logits", lambda ref: float32_of(reference(ref.RNNLM(V, E, H), w, F64)(tokens)[0]))
    assert_close(output(pair(lm(tokens), "RNNLM(7, 4, 3)(tokens)")[0], None, "RNNLM"), expected,
                 "RNNLM(7, 4, 3)(tokens (2, 5)) logits", rtol=1e-5, atol=1e-5)
    toy = {"embedding.weight": randn(t, V, 4, dtype=F32), "proj.weight": randn(t, V, 4, dtype=F32),
           "proj.bias": randn(t, V, dtype=F32)}
    model = module(t, t.student.ToyRecurrentLM, (V, 4), toy)
    for pad_id in (None, 0):
        expected = t.expected(f"loss{pad_id}",
                              lambda ref: float32_of(ref.lm_loss(reference(ref.ToyRecurrentLM(V, 4), toy, F64), tokens, pad_id)))
        assert_close(t.student.lm_loss(model, tokens, pad_id=pad_id), expected,
                     f"lm_loss(ToyRecurrentLM(7, 4), tokens (2, 5) padded with 0, pad_id={pad_id})", rtol=1e-5)


@check(4, 1, "batchify, get_chunk (a short last chunk), and clip_grad_norm of two gradients", public=True,
       uses=("batchify", "get_chunk", "clip_grad_norm"))
def public_tbptt_pieces(t):
    stream = torch.arange(100, 123)
    data = t.student.batchify(stream, 3)
    assert_equal(output(data, None, "batchify").tolist(), stream[:21].view(3, 7).tolist(), "batchify(arange(100, 123), 3)")
    inputs, targets = pair(t.student.get_chunk(stream[:21].view(3, 7), 4, 4), "get_chunk")
    assert_equal(output(inputs, None, "get_chunk").tolist(), [[104, 105], [111, 112], [118, 119]],
                 "get_chunk(batchify(arange(100, 123), 3), 4, 4) inputs")
    assert_equal(output(targets, None, "get_chunk").tolist(), [[105, 106], [112, 113], [119, 120]],
                 "get_chunk(batchify(arange(100, 123), 3), 4, 4) targets")
    params = []
    for grad in (torch.tensor([3.0, 0.0], dtype=F64), torch.tensor([[0.0], [4.0]], dtype=F64)):
        p = t.student.put(torch.zeros_like(grad).requires_grad_(True), "a parameter")
        p.backward(grad)
        params.append(p)
    norm = t.student.clip_grad_norm(params, 1.0)
    assert_close(as_array(norm, "clip_grad_norm")[0], 5.0, "clip_grad_norm(gradients [3, 0] and [[0], [4]], 1.0): "
                 "the norm before clipping (the global norm, over both)")
    scale = 1.0 / (5.0 + 1e-6)
    assert_close(params[0].grad.get(), torch.tensor([3.0, 0.0], dtype=F64) * scale, "the first gradient after clipping")
    assert_close(params[1].grad.get(), torch.tensor([[0.0], [4.0]], dtype=F64) * scale,
                 "the second gradient after clipping")


@check(4, 1, "train_lm: the first three losses on ToyRecurrentLM (state carried and detached, clipping)",
       public=True, uses=("batchify", "get_chunk", "detach_state", "clip_grad_norm", "train_lm"))
def public_train_lm(t):
    toy = {"embedding.weight": randn(t, 6, 4, dtype=F32), "proj.weight": randn(t, 6, 4, dtype=F32, scale=0.5),
           "proj.bias": randn(t, 6, dtype=F32, scale=0.1)}
    stream = torch.tensor([1, 3, 5, 2, 0, 4, 4, 1, 2, 3, 5, 0, 1, 1, 2, 5, 3, 0, 2, 4, 1, 0])
    settings = dict(steps=3, lr=0.5, batch_size=2, bptt=4, clip=0.1)
    model = module(t, t.student.ToyRecurrentLM, (6, 4), toy, F64)
    got = t.student.train_lm(model, stream, **settings)
    expected = t.expected("losses", lambda ref: ref.train_lm(reference(ref.ToyRecurrentLM(6, 4), toy, F64), stream,
                                                             **settings))
    assert_close(as_array(got, "train_lm losses")[0], expected,
                 "train_lm(ToyRecurrentLM(6, 4), stream (22,), steps=3, lr=0.5, batch_size=2, bptt=4, clip=0.1) losses",
                 rtol=1e-7)


@check(5, 1, "hidden_grad_norms of an RNNCell over 6 steps", public=True, uses=("hidden_grad_norms",),
       needs=("RNNCell",))
def public_hidden_grad_norms(t):
    w, x = weights(t, 1, 3, 4), randn(t, 2, 6, 3, dtype=F64)
    cell = module(t, t.student.RNNCell, (3, 4), w, F64)
    expected = t.expected("norms", lambda ref: ref.hidden_grad_norms(reference(ref.RNNCell(3, 4), w, F64), x))
    assert_close(t.student.hidden_grad_norms(cell, x), expected, "hidden_grad_norms(RNNCell(3, 4), x (2, 6, 3))")


def public_table() -> torch.Tensor:
    """Four tokens, 3 = </s>. After anything, 0 is likeliest, but after 0 every token is equally likely."""
    table = torch.full((4, 4, 4), 0.0, dtype=F64)
    table[:, :, 0] = 1.2
    table[:, 1, 1] = 1.0
    table[:, 1, 3] = 3.0
    table[:, 0] = 0.0
    return table


@check(6, 1, "greedy_decode and beam_search on a 4-token table model", public=True,
       uses=("greedy_decode", "beam_search"))
def public_decoding(t):
    model = t.student.TableModel(public_table())
    greedy = t.student.greedy_decode(model, [2], 4, 3)
    assert_equal(greedy, t.expected("greedy", lambda ref: ref.greedy_decode(ref.TableModel(public_table()), [2], 4, 3)),
                 "greedy_decode(TableModel(table), prefix=[2], max_len=4, eos_id=3)")
    beams = t.student.beam_search(model, [2], 3, 4, 3, alpha=1.0)
    expected = t.expected("beam", lambda ref: ref.beam_search(ref.TableModel(public_table()), [2], 3, 4, 3, alpha=1.0))
    what = "beam_search(TableModel(table), prefix=[2], beam_size=3, max_len=4, eos_id=3, alpha=1.0)"
    if not isinstance(beams, list) or not beams:
        raise CheckFailed(f"{what} should return a non-empty list of (tokens, score) pairs")
    got_best = pair(beams[0], what + "[0]")
    assert_equal(list(got_best[0]), list(expected[0][0]), what + ": the best hypothesis")
    assert_close(float(got_best[1]), expected[0][1], what + ": its score (log-probability / length)")


@check(7, 1, "RNNLM with LSTMLayer trained by train_lm for 3 steps", public=True, uses=("train_lm",),
       needs=("RNNLM", "LSTMLayer", "LSTMCell"))
def public_q7(t):
    V, E, H = 9, 4, 6
    w = {"embedding.weight": randn(t, V, E, dtype=F32), **weights(t, 4, E, H, "rnn.cell."),
         "proj.weight": randn(t, V, H, dtype=F32), "proj.bias": randn(t, V, dtype=F32, scale=0.1)}
    stream = torch.from_numpy(t.rng.integers(0, V, size=60))
    settings = dict(steps=3, lr=1.0, batch_size=4, bptt=5, clip=0.5)
    lm = module(t, t.student.RNNLM, (V, E, H), w, F64)
    got = t.student.train_lm(lm, stream, **settings)
    expected = t.expected("losses", lambda ref: ref.train_lm(reference(ref.RNNLM(V, E, H), w, F64), stream, **settings))
    assert_close(as_array(got, "train_lm losses")[0], expected, "train_lm(RNNLM(9, 4, 6), stream (60,), steps=3, "
                 "lr=1.0, batch_size=4, bptt=5, clip=0.5) losses", rtol=1e-7)


@check(8, 1, "AdditiveAttention with a padding mask", public=True, uses=("AdditiveAttention",))
def public_attention(t):
    w = {"query_proj.weight": randn(t, 5, 3, dtype=F32), "key_proj.weight": randn(t, 5, 4, dtype=F32),
         "key_proj.bias": randn(t, 5, dtype=F32), "score.weight": randn(t, 1, 5, dtype=F32)}
    query, keys = randn(t, 2, 3, dtype=F32), randn(t, 2, 6, 4, dtype=F32)
    mask = torch.tensor([[True] * 6, [True, True, True, False, False, False]])
    attention = module(t, t.student.AdditiveAttention, (3, 4, 5), w)
    context, weights_ = pair(attention(query, keys, mask), "AdditiveAttention(3, 4, 5)(query, keys, mask)")
    expected = t.expected("out", lambda ref: float32_of(reference(ref.AdditiveAttention(3, 4, 5), w, F64)(
        query.double(), keys.double(), mask)))
    what = "AdditiveAttention(3, 4, 5)(query (2, 3), keys (2, 6, 4), mask (2, 6))"
    assert_close(weights_, expected[1], what + " weights", rtol=1e-5, atol=1e-5)
    assert_close(context, expected[0], what + " context", rtol=1e-5, atol=1e-5)
