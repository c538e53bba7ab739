"""Public checks for `rnn_lm`: small fixed cases students can run and debug with.

Expected values come from `t.expected(...)`: fixtures recorded from the reference by `lmgrade build`,
in float64 and rounded once (`float32_of`) where the check runs in float32, so they are the same on every CPU.
Dims are distinct (B != T != d != H), and each input is chosen to show the commonest bug of its
question: an initial state that is not zero (a layer that ignores h0), gates in PyTorch's order,
padding in the loss, a short last chunk, clipping that needs the global norm, a table where greedy
and the best sequence differ; and the commonest bugs of every question beyond its formula: float64
inputs (a zero state made in float32), the caller's arguments changed in place (`call_pure`), a
tensor made on a fixed device (the meta probe), logits of thousands (a softmax or log written by
hand overflows), returned types the docstrings fix, and edge arguments (`max_len=0`, `N % B == 0`).
No public check trains beyond three exact steps of a tiny model.
"""
import numpy as np
import torch

from autograder.checking import chi_square, properties
from autograder.checking.checks import check
from autograder.checking.compare import as_array, assert_close, assert_equal
from autograder.checking.purity import assert_global_generators_untouched, call_pure, call_twice
from autograder.checking.remote import StudentError
from autograder.checking.training import float_list, spelled
from autograder.checking.torch_checks import assert_device_agnostic, float32_of, load_weights, output, randn
from autograder.errors import CheckFailed

F32, F64 = torch.float32, torch.float64


def weights(t, gates: int, d: int, H: int, prefix: str = "") -> dict:
    return {f"{prefix}weight_ih": randn(t, gates * H, d, dtype=F32, scale=H ** -0.5),
            f"{prefix}weight_hh": randn(t, gates * H, H, dtype=F32, scale=H ** -0.5),
            f"{prefix}bias_ih": randn(t, gates * H, dtype=F32, scale=0.3),
            f"{prefix}bias_hh": randn(t, gates * H, dtype=F32, scale=0.3)}


def module(t, cls, args: tuple, state: dict, dtype=F32, **kwargs):
    m = cls(*args, **kwargs)
    m = m.double() if dtype == F64 else m.float()
    load_weights(t, m, {k: v.to(dtype) for k, v in state.items()}, f"{getattr(cls, '_label', 'the module')}{args}")
    return m.to(t.device)


def reference(cls, state: dict, dtype=F32):
    cls.load_state_dict(state)
    return cls.to(dtype)


def pair(value, what: str) -> list:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise CheckFailed(f"{what} should return a pair, got {type(value).__name__}")
    return list(value)


def layer_case(t, cls, name: str, w: dict, x, state, dtype):
    """One call of the student's layer, as the docstring allows it (state or None), against the fixture."""
    d, H = x.shape[-1], w["cell.weight_hh"].shape[1]
    layer = module(t, cls, (d, H), w, dtype)
    label = "no initial state" if state is None else "an initial state"
    what = f"{name}({d}, {H})(x {tuple(x.shape)}, {label}, {str(dtype).removeprefix('torch.')})"
    args = (x.to(dtype),) if state is None else (x.to(dtype), state)
    return what, pair(call_pure(layer, *args, what=what), what)


@check(1, 1, "RNNLayer on a small batch with an initial state, without one in float64, with saturated inputs",
       public=True, uses=("RNNCell", "RNNLayer"))
def public_rnn(t):
    w, x, h0 = weights(t, 1, 4, 5, "cell."), randn(t, 2, 3, 4, dtype=F32), randn(t, 2, 5, dtype=F32)
    loud = randn(t, 2, 3, 4, dtype=F32, scale=1000.0)
    for key, inputs, dtype in (("out", (x, h0), F32), ("zero", (x, None), F64), ("loud", (loud, h0), F32)):
        what, got = layer_case(t, t.student.RNNLayer, "RNNLayer", w, *inputs, dtype)
        expected = t.expected(key, lambda ref: float32_of(reference(ref.RNNLayer(4, 5), w, F64)(
            inputs[0].double(), None if inputs[1] is None else inputs[1].double())))
        if dtype == F64:
            if got[0].dtype != F64:
                raise CheckFailed(f"{what}: float64 inputs gave {str(got[0].dtype).removeprefix('torch.')} outputs; "
                                  "make the zero state like x: x.new_zeros(B, H)")
            expected = [e.double() for e in expected]
        note = " (entries of about 1000: use torch.tanh, not exp by hand)" if key == "loud" else ""
        assert_close(got[0], expected[0], what + " outputs" + note, rtol=1e-5, atol=1e-5)
        assert_close(got[1], expected[1], what + " last state" + note, rtol=1e-5, atol=1e-5)
    assert_device_agnostic(module(t, t.student.RNNLayer, (4, 5), w), [x], "RNNLayer(4, 5)(x)")
    properties.run_generator(t, "RNNLayer(4, 5)", module(t, t.student.RNNLayer, (4, 5), w), "x (2, 3, 4), h0 (2, 5)",
                             (x, h0))


@check(2, 1, "LSTMLayer on a small batch with an initial (h, c), without one in float64, with saturated inputs",
       public=True, uses=("LSTMCell", "LSTMLayer"))
def public_lstm(t):
    w, x = weights(t, 4, 4, 3, "cell."), randn(t, 2, 5, 4, dtype=F32)
    state = (randn(t, 2, 3, dtype=F32), randn(t, 2, 3, dtype=F32))
    loud = randn(t, 2, 5, 4, dtype=F32, scale=1000.0)
    for key, inputs, dtype in (("out", (x, state), F32), ("zero", (x, None), F64), ("loud", (loud, state), F32)):
        what, got = layer_case(t, t.student.LSTMLayer, "LSTMLayer", w, *inputs, dtype)
        h, c = pair(got[1], what + " state")
        out = got[0]
        if key == "loud":  # saturated gates: values of exactly 0 and 1, so finiteness is what tells (a NaN)
            for value, name in ((out, "outputs"), (h, "h_T"), (c, "c_T")):
                if not bool(torch.isfinite(output(value, None, what)).all()):
                    raise CheckFailed(f"{what}: the {name} hold NaN or inf with inputs of about 1000 (saturated "
                                      "gates): use torch.sigmoid and torch.tanh, not exp by hand, which overflows.")
            continue
        expected = t.expected(key, lambda ref: float32_of(reference(ref.LSTMLayer(4, 3), w, F64)(
            inputs[0].double(), None if inputs[1] is None else tuple(s.double() for s in inputs[1]))))
        if dtype == F64:
            for value, name in ((out, "outputs"), (h, "h_T"), (c, "c_T")):
                if output(value, None, what).dtype != F64:
                    raise CheckFailed(f"{what}: float64 inputs gave a {str(value.dtype).removeprefix('torch.')} "
                                      f"{name}; make the zero state like x: x.new_zeros(B, H) for both h and c")
            expected = [expected[0].double(), tuple(e.double() for e in expected[1])]
        assert_close(out, expected[0], what + " outputs", rtol=1e-5, atol=1e-5)
        assert_close(h, expected[1][0], what + " h_T", rtol=1e-5, atol=1e-5)
        assert_close(c, expected[1][1], what + " c_T", rtol=1e-5, atol=1e-5)
    assert_device_agnostic(module(t, t.student.LSTMLayer, (4, 3), w), [x], "LSTMLayer(4, 3)(x)")
    properties.run_generator(t, "LSTMLayer(4, 3)", module(t, t.student.LSTMLayer, (4, 3), w), "x (2, 5, 4), (h0, c0)",
                             (x, state))


def toy(t, V: int, scale: float = 1.0) -> dict:
    return {"embedding.weight": randn(t, V, 4, dtype=F32), "proj.weight": randn(t, V, 4, dtype=F32) * scale,
            "proj.bias": randn(t, V, dtype=F32)}


@check(3, 1, "RNNLM logits with and without a state, tied weights, and lm_loss on a padded batch (also with logits of "
             "thousands)", public=True, uses=("RNNLM", "lm_loss"), needs=("LSTMCell", "LSTMLayer"))
def public_rnnlm(t):
    V, E, H = 7, 4, 3
    w = {"embedding.weight": randn(t, V, E, dtype=F32), **weights(t, 4, E, H, "rnn.cell."),
         "proj.weight": randn(t, V, H, dtype=F32), "proj.bias": randn(t, V, dtype=F32, scale=0.1)}
    tokens = torch.tensor([[1, 4, 6, 2, 3], [5, 2, 0, 0, 0]])
    state = (randn(t, 2, H, dtype=F32), randn(t, 2, H, dtype=F32))
    lm = module(t, t.student.RNNLM, (V, E, H), w)
    for key, given in (("logits", None), ("with state", state)):
        what = f"RNNLM(7, 4, 3)(tokens (2, 5){', a state (h, c)' if given else ''})"
        expected = t.expected(key, lambda ref: float32_of(reference(ref.RNNLM(V, E, H), w, F64)(
            tokens, None if given is None else tuple(s.double() for s in given))[0]))
        got = pair(call_pure(lm, tokens, *(() if given is None else (given,)), what=what), what)[0]
        assert_close(output(got, None, what), expected, what + " logits" + (" (pass the state to self.rnn)" if given
                                                                                 else ""), rtol=1e-5, atol=1e-5)
    properties.run_generator(t, "RNNLM(7, 4, 3)", lm, "tokens (2, 5)", (tokens,))
    tied_checks(t)
    toy_w = toy(t, V)
    for key, weights_, label in (("", toy_w, ""), ("loud", dict(toy_w, **{"proj.weight": toy_w["proj.weight"] * 2000}),
                                                      " with logits of thousands")):
        model = module(t, t.student.ToyRecurrentLM, (V, 4), weights_)
        for pad_id in (None, 0):
            what = f"lm_loss(ToyRecurrentLM(7, 4){label}, tokens (2, 5) padded with 0, pad_id={pad_id})"
            expected = t.expected(f"loss{pad_id}{key}", lambda ref: float32_of(
                ref.lm_loss(reference(ref.ToyRecurrentLM(V, 4), weights_, F64), tokens, pad_id)))
            got = call_pure(t.student.lm_loss, model, tokens, pad_id=pad_id, what=what)
            if not isinstance(got, torch.Tensor):
                raise CheckFailed(f"{what} should return the loss as a 0-dim tensor, got {type(got).__name__}: a Python "
                                  "number cannot be backpropagated (no .item() or float()).")
            assert_close(got, expected, what + (" (inf: log of an underflowed softmax; use F.cross_entropy)" if key
                                                 else ""), rtol=1e-5)
    properties.run_generator(t, "lm_loss", t.student.lm_loss, "ToyRecurrentLM(7, 4), tokens (2, 5), pad_id=0",
                             (module(t, t.student.ToyRecurrentLM, (V, 4), toy_w), tokens), {"pad_id": 0})


def tied_checks(t) -> None:
    """tie_weights=True: one parameter for both uses, a ValueError for sizes that cannot be tied."""
    V, E = 6, 4
    what = f"RNNLM({V}, {E}, {E}, tie_weights=True)"
    model = t.student.RNNLM(V, E, E, tie_weights=True).double()
    got = model.vjp([torch.tensor([[1, 2, 3]])], [], torch.ones(1, 3, V, dtype=F64), output_index=0)
    names = set(got.get("param_grads", {})) if isinstance(got, dict) else set()
    if "embedding.weight" not in names or "proj.weight" in names:
        raise CheckFailed(f"{what}: the model's parameters are {sorted(names)}; with tied weights `proj.weight` must be "
                          "the embedding's own parameter (self.proj.weight = self.embedding.weight), not a copy or a "
                          "new nn.Parameter.")
    try:
        t.student.RNNLM(V, 4, 5, tie_weights=True)
    except StudentError as exc:
        if "ValueError" not in str(exc):
            raise CheckFailed(f"RNNLM({V}, 4, 5, tie_weights=True) should raise ValueError (emb_dim != hidden_size), "
                              f"got: {str(exc).splitlines()[0]}") from None
    else:
        raise CheckFailed(f"RNNLM({V}, 4, 5, tie_weights=True) should raise ValueError: tied weights need "
                          "emb_dim == hidden_size.")


@check(4, 1, "batchify (N % B == 0 too), get_chunk (a short last chunk), detach_state of a pair, and clip_grad_norm of "
             "two gradients (and of none)", public=True,
       uses=("batchify", "get_chunk", "detach_state", "clip_grad_norm"))
def public_tbptt_pieces(t):
    stream = torch.arange(100, 123)
    for N, B in ((23, 3), (20, 4)):
        data = t.student.batchify(stream[:N], B)
        assert_equal(output(data, None, "batchify").tolist(), stream[:N - N % B].view(B, -1).tolist(),
                     f"batchify(arange(100, {100 + N}), {B})")
    properties.run_generator(t, "batchify", t.student.batchify, "arange(100, 123), 3", (stream, 3))
    inputs, targets = pair(t.student.get_chunk(stream[:21].view(3, 7), 4, 4), "get_chunk")
    properties.run_generator(t, "get_chunk", t.student.get_chunk, "data (3, 7), 4, 4", (stream[:21].view(3, 7), 4, 4))
    assert_equal(output(inputs, None, "get_chunk").tolist(), [[104, 105], [111, 112], [118, 119]],
                 "get_chunk(batchify(arange(100, 123), 3), 4, 4) inputs")
    assert_equal(output(targets, None, "get_chunk").tolist(), [[105, 106], [112, 113], [119, 120]],
                 "get_chunk(batchify(arange(100, 123), 3), 4, 4) targets")
    h, c = (t.student.put(randn(t, 2, 3).requires_grad_(True), "a state that requires grad") for _ in range(2))
    detached = t.student.detach_state((h, c))
    properties.run_generator(t, "detach_state", t.student.detach_state, "h (2, 3)", (torch.ones(2, 3, dtype=F64),))
    if not isinstance(detached, tuple) or len(detached) != 2:
        raise CheckFailed(f"detach_state((h, c)) should return a tuple (h, c), as the LSTM's state is, got "
                          f"{type(detached).__name__}")
    if h.requires_grad.get() is not True:
        raise CheckFailed("detach_state((h, c)): the caller's h no longer requires grad: it was detached in place "
                          "(.detach_()); return new tensors (s.detach()) and leave the argument alone.")
    try:  # with the history cut, backward through the call has nothing to reach
        got = t.student.detach_state.vjp([randn(t, 2, 3)], [0], torch.ones(2, 3, dtype=F64))
    except StudentError:
        got = None
    grads = got.get("input_grads") if isinstance(got, dict) else None
    if isinstance(grads, list) and grads and isinstance(grads[0], torch.Tensor) and bool(grads[0].abs().sum() > 0):
        raise CheckFailed("detach_state(h): a gradient flows through the returned state into h; cut it with "
                          ".detach() (a clone keeps the history).")
    params = []
    for grad in (torch.tensor([3.0, 0.0], dtype=F64), torch.tensor([[0.0], [4.0]], dtype=F64)):
        p = t.student.put(torch.zeros_like(grad).requires_grad_(True), "a parameter")
        p.backward(grad)
        params.append(p)
    what = "clip_grad_norm(gradients [3, 0] and [[0], [4]], 1.0)"
    norm = t.student.clip_grad_norm(params, 1.0)
    if isinstance(norm, bool) or not isinstance(norm, float):
        raise CheckFailed(f"{what} should return the norm before clipping as a Python float, got "
                          f"{type(norm).__name__} (return float(total))")
    assert_close(norm, 5.0, what + ": the norm before clipping (the global norm, over both)", rtol=1e-12)
    scale = 1.0 / (5.0 + 1e-6)
    assert_close(params[0].grad.get(), torch.tensor([3.0, 0.0], dtype=F64) * scale,
                 "the first gradient after clipping (scaled by max_norm / (norm + 1e-6))", rtol=1e-12, atol=1e-15)
    assert_close(params[1].grad.get(), torch.tensor([[0.0], [4.0]], dtype=F64) * scale,
                 "the second gradient after clipping", rtol=1e-12, atol=1e-15)
    extra = t.student.put(torch.zeros(2, dtype=F64).requires_grad_(True), "a parameter")
    extra.backward(torch.tensor([3.0, 4.0], dtype=F64))
    properties.run_generator(t, "clip_grad_norm", t.student.clip_grad_norm, "a gradient [3, 4], 1.0", ([extra], 1.0))
    bare = t.student.put(torch.zeros(3, dtype=F64).requires_grad_(True), "a parameter without a gradient")
    what = "clip_grad_norm([a parameter whose .grad is None], 1.0)"
    assert_equal(t.student.clip_grad_norm([bare], 1.0), 0.0, what + " (no gradient at all: the norm is 0.0)")


@check(4, 1, "train_lm: the first losses on ToyRecurrentLM (state carried and detached, a short chunk, the wrap-around "
             "at L - 1, clipping, logits of thousands)",
       public=True, uses=("batchify", "get_chunk", "detach_state", "clip_grad_norm", "train_lm"))
def public_train_lm(t):
    toy_w = {"embedding.weight": randn(t, 6, 4, dtype=F32), "proj.weight": randn(t, 6, 4, dtype=F32, scale=0.5),
             "proj.bias": randn(t, 6, dtype=F32, scale=0.1)}
    loud = dict(toy_w, **{"proj.weight": toy_w["proj.weight"] * 2000})
    stream = torch.tensor([1, 3, 5, 2, 0, 4, 4, 1, 2, 3, 5, 0, 1, 1, 2, 5, 3, 0, 2, 4, 1, 0])
    for key, settings, w in (("losses", dict(steps=3, lr=0.5, batch_size=2, bptt=4, clip=0.1), toy_w),
                             ("wrap", dict(steps=4, lr=0.5, batch_size=2, bptt=5, clip=0.1), toy_w),
                             ("loud", dict(steps=2, lr=0.5, batch_size=2, bptt=4, clip=0.1), loud)):
        what = (f"train_lm(ToyRecurrentLM(6, 4){' with logits of thousands' if w is loud else ''}, stream (22,), "
                f"{spelled(settings)})")
        model = module(t, t.student.ToyRecurrentLM, (6, 4), w, F64)
        got = float_list(t.student.train_lm(model, stream, **settings), what)
        expected = t.expected(key, lambda ref: ref.train_lm(reference(ref.ToyRecurrentLM(6, 4), w, F64), stream,
                                                            **settings))
        note = {"wrap": " (L = 11: the 3rd step starts at i = 10 = L - 1, where fewer than two tokens are left: start "
                        "over at i = 0 with state None)", "loud": " (use F.cross_entropy: log(softmax) is -inf here)"}
        assert_close(got, expected, what + " losses" + note.get(key, ""), rtol=1e-7)
    properties.run_generator(t, "train_lm", t.student.train_lm, "ToyRecurrentLM(6, 4), stream (22,), steps=2",
                             (module(t, t.student.ToyRecurrentLM, (6, 4), toy_w, F64), stream), {**settings})


@check(5, 1, "hidden_grad_norms of an RNNCell over 6 steps, and of an LSTMCell from a given (h, c)", public=True,
       uses=("hidden_grad_norms",), needs=("RNNCell", "LSTMCell"))
def public_hidden_grad_norms(t):
    w, x = weights(t, 1, 3, 4), randn(t, 2, 6, 3, dtype=F64)
    cell = module(t, t.student.RNNCell, (3, 4), w, F64)
    expected = t.expected("norms", lambda ref: ref.hidden_grad_norms(reference(ref.RNNCell(3, 4), w, F64), x))
    assert_close(t.student.hidden_grad_norms(cell, x), expected, "hidden_grad_norms(RNNCell(3, 4), x (2, 6, 3))")
    properties.run_generator(t, "hidden_grad_norms", t.student.hidden_grad_norms, "RNNCell(3, 4), x (2, 6, 3)",
                             (cell, x))
    w, x = weights(t, 4, 3, 4), randn(t, 2, 5, 3, dtype=F64)
    state = (randn(t, 2, 4, dtype=F64), randn(t, 2, 4, dtype=F64))
    cell = module(t, t.student.LSTMCell, (3, 4), w, F64)
    what = "hidden_grad_norms(LSTMCell(3, 4), x (2, 5, 3), state (h, c), float64)"
    expected = t.expected("lstm", lambda ref: ref.hidden_grad_norms(reference(ref.LSTMCell(3, 4), w, F64), x, state))
    got = output(t.student.hidden_grad_norms(cell, x, state), None, what)
    if got.dtype != F64:
        raise CheckFailed(f"{what}: float64 inputs gave {str(got.dtype).removeprefix('torch.')} norms; stack the "
                          "norms as tensors (torch.stack), not a tensor of .item()s")
    assert_close(got, expected, what + " (norms of d sum(h_T) / d h_t, from the given state, h not c)")


def public_table() -> torch.Tensor:
    """Four tokens, 3 = </s>. After anything, 0 is likeliest, but after 0 every token is equally likely."""
    table = torch.full((4, 4, 4), 0.0, dtype=F64)
    table[:, :, 0] = 1.2
    table[:, 1, 1] = 1.0
    table[:, 1, 3] = 3.0
    table[:, 0] = 0.0
    return table


def random_table(V: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """A fixed table of logits (the same on every machine: numpy's generator)."""
    return torch.from_numpy(np.random.default_rng(seed).standard_normal((V, V, V)) * scale)


def loud_table(V: int, seed: int) -> torch.Tensor:
    """Logits of thousands with a clear winner in every context: softmax is one-hot, exp by hand overflows."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(np.argsort(rng.random((V, V, V)), axis=-1) * 1000.0 + rng.standard_normal((V, V, V)))


def beam_pairs(value, what: str) -> list:
    if not isinstance(value, list) or not value:
        raise CheckFailed(f"{what} should return a non-empty list of (tokens, score) pairs, got {str(value)[:80]}")
    return [(list(p[0]), float(p[1])) for p in (pair(item, what) for item in value)]


@check(6, 1, "greedy_decode and beam_search on table models (a 3-token prefix, max_len=0, a beam where finished "
             "hypotheses leave, logits of thousands) and on a model whose state is a pair", public=True, uses=("greedy_decode", "beam_search"))
def public_decoding(t):
    model = t.student.TableModel(public_table())
    for prefix, max_len in (([2], 4), ([1, 2, 1], 3), ([2], 0)):
        what = f"greedy_decode(TableModel(table), prefix={prefix}, max_len={max_len}, eos_id=3)"
        greedy = call_pure(t.student.greedy_decode, model, prefix, max_len, 3, what=what)
        assert_equal(greedy, t.expected(f"greedy{prefix}{max_len}", lambda ref: ref.greedy_decode(
            ref.TableModel(public_table()), prefix, max_len, 3)), what)
    properties.run_generator(t, "greedy_decode", t.student.greedy_decode, "TableModel(table), prefix=[2], max_len=4, eos_id=3",
                             (model, [2], 4, 3))
    beams = t.student.beam_search(model, [2], 3, 4, 3, alpha=1.0)
    expected = t.expected("beam", lambda ref: ref.beam_search(ref.TableModel(public_table()), [2], 3, 4, 3, alpha=1.0))
    what = "beam_search(TableModel(table), prefix=[2], beam_size=3, max_len=4, eos_id=3, alpha=1.0)"
    got_best = beam_pairs(beams, what)[0]
    assert_equal(list(got_best[0]), list(expected[0][0]), what + ": the best hypothesis")
    assert_close(float(got_best[1]), expected[0][1], what + ": its score (log-probability / length)")
    for label, table, args in (("a random table", random_table(5, 3), ([0, 4], 2, 5, 1, 0.7)),
                               ("a table of logits of thousands", loud_table(5, 4), ([1], 2, 4, 0, 1.0)),
                               ("a random table", random_table(5, 5, 1.5), ([2], 3, 5, 4, 0.0))):
        prefix, width, max_len, eos, alpha = args
        what = (f"beam_search(TableModel({label}), prefix={prefix}, beam_size={width}, max_len={max_len}, "
                f"eos_id={eos}, alpha={alpha})")
        got = beam_pairs(call_pure(t.student.beam_search, t.student.TableModel(table), prefix, width, max_len, eos,
                                   alpha=alpha, what=what), what)
        expected = t.expected(what, lambda ref: [(list(tk), float(sc)) for tk, sc in ref.beam_search(
            ref.TableModel(table), prefix, width, max_len, eos, alpha=alpha)])
        assert_equal([tk for tk, _ in got], [list(tk) for tk, _ in expected], what + ": the hypotheses, best first "
                     "(finished ones leave the beam but took one of its places; open ones at max_len count)")
        assert_close(np.array([sc for _, sc in got]), np.array([sc for _, sc in expected]), what + ": their scores "
                     "(log-probability / len**alpha; log_softmax, not log(softmax))", rtol=1e-6, atol=1e-9)
    properties.run_generator(t, "beam_search", t.student.beam_search, "TableModel(table), prefix=[2], beam_size=3, "
                             "max_len=4, eos_id=3", (model, [2], 3, 4, 3))
    w = pair_state_toy(t)
    toy = module(t, t.student.ToyRecurrentLM, (5, 3), w, F64, pair_state=True)
    what = f"greedy_decode({PAIR}, max_len=4, eos_id=4)"
    assert_equal(call_pure(t.student.greedy_decode, toy, [1, 2], 4, 4, what=what), t.expected("pair greedy", lambda ref: (
        ref.greedy_decode(reference(ref.ToyRecurrentLM(5, 3, pair_state=True), w, F64), [1, 2], 4, 4))), what + PAIR_NOTE)
    what = f"beam_search({PAIR}, beam_size=2, max_len=3, eos_id=4)"
    got = beam_pairs(call_pure(t.student.beam_search, toy, [1, 2], 2, 3, 4, what=what), what)
    expected = t.expected("pair beam", lambda ref: [list(tk) for tk, _ in ref.beam_search(
        reference(ref.ToyRecurrentLM(5, 3, pair_state=True), w, F64), [1, 2], 2, 3, 4)])
    assert_equal([list(tk) for tk, _ in got], expected, what + PAIR_NOTE)


def pair_state_toy(t) -> dict:
    """A `ToyRecurrentLM(5, 3, pair_state=True)` (its state a pair, as an LSTM's (h, c)) with logits of thousands
    (sampling is greedy there, whatever the sampler draws) where eos_id 4 is never likely, so a decoder feeds the
    state back at every step: its weights, for `module` and `reference`."""
    return {"embedding.weight": randn(t, 5, 3, dtype=F32), "proj.weight": randn(t, 5, 3, dtype=F32, scale=1000.0),
            "proj.bias": torch.tensor([0.0, 0.0, 0.0, 0.0, -1e5])}


PAIR = "ToyRecurrentLM(5, 3, pair_state=True) (its state a pair, as an LSTM's (h, c)), prefix [1, 2]"
PAIR_NOTE = ": pass the state on as the model returned it (a tuple for an LSTM), no .clone()/.detach()/.to() on it"


SAMPLE_SEEDS = 600


@check(6, 1, "sample: a seed gives one sequence, torch's global generator untouched, the caller's prefix kept, "
             f"frequencies of softmax(logits / 0.5) over {SAMPLE_SEEDS} seeds, logits of thousands at temperature 0.05",
       public=True, uses=("sample",))
def public_sample(t):
    table = random_table(3, 6, 1.5)
    model = t.student.TableModel(table)
    what = "sample(TableModel, [0, 1], 4, 2, temperature=0.5, seed=7)"
    call_twice(t.student.sample, model, [0, 1], 4, 2, temperature=0.5, seed=7, what=what)
    call_pure(t.student.sample, model, [0, 1], 4, 2, temperature=0.5, seed=7, what=what)
    assert_global_generators_untouched(t.student, lambda: t.student.sample(model, [0, 1], 4, 2, 0.5, 7), what, seed=99)
    assert_equal(t.student.sample(model, [0, 1], 0, 2, 0.5, 7), [], what.replace("4", "0", 1) + " (no new token)")
    # every sequence of at most 2 tokens, and its probability under softmax(logits / 0.5)
    logits = table.numpy() / 0.5
    sequences, probs = [], []
    for a in range(3):
        la = logits[0, 1] - np.logaddexp.reduce(logits[0, 1])
        if a == 2:
            sequences.append((a,)), probs.append(np.exp(la[a]))
            continue
        lb = logits[1, a] - np.logaddexp.reduce(logits[1, a])
        for b in range(3):
            sequences.append((a, b)), probs.append(np.exp(la[a] + lb[b]))
    got = t.student.sample.map([(model, [0, 1], 2, 2, 0.5, s) for s in range(SAMPLE_SEEDS)], timeout=60)
    counts = np.zeros(len(sequences))
    for seq in got:
        if not isinstance(seq, list) or tuple(seq) not in sequences:
            raise CheckFailed(f"sample(TableModel, [0, 1], max_len=2, eos_id=2, temperature=0.5) returned {seq}: not a "
                              "possible output (a list of at most 2 token ids, ending at the first 2)")
        counts[sequences.index(tuple(seq))] += 1
    expected = np.array(probs) * SAMPLE_SEEDS
    p, _, df = chi_square.pearson(counts, probs)
    if p < SAMPLE_ALPHA:
        worst = int(np.argmax(np.abs(counts - expected) / np.sqrt(expected + 1)))
        raise CheckFailed(f"sample(TableModel, [0, 1], max_len=2, eos_id=2, temperature=0.5) over seeds 0..{SAMPLE_SEEDS - 1}: "
                          f"the sequences do not follow softmax(logits / temperature) (chi-square p = {p:.2g} with {df} "
                          f"degrees of freedom); e.g. {list(sequences[worst])} came {int(counts[worst])} times, expected about "
                          f"{expected[worst]:.0f}. Divide the logits by the temperature before the softmax, and make "
                          "one generator per call, seeded with seed, passed to every draw.")
    loud = t.student.TableModel(loud_table(4, 8))
    expected = t.expected("loud", lambda ref: ref.greedy_decode(ref.TableModel(loud_table(4, 8)), [1, 2], 5, 3))
    for seed in (0, 1):
        what = f"sample(TableModel(logits of thousands), [1, 2], 5, 3, temperature=0.05, seed={seed})"
        assert_equal(t.student.sample(loud, [1, 2], 5, 3, temperature=0.05, seed=seed), expected,
                     what + ": softmax(logits / temperature) is one-hot here, so this is the greedy sequence "
                            "(exp by hand overflows; torch.softmax does not)")
    w = pair_state_toy(t)
    toy = module(t, t.student.ToyRecurrentLM, (5, 3), w, F64, pair_state=True)
    what = f"sample({PAIR}, max_len=4, eos_id=4, seed=3)"
    assert_equal(call_pure(t.student.sample, toy, [1, 2], 4, 4, seed=3, what=what), t.expected("pair", lambda ref: (
        ref.sample(reference(ref.ToyRecurrentLM(5, 3, pair_state=True), w, F64), [1, 2], 4, 4, seed=3))), what + PAIR_NOTE)


SAMPLE_ALPHA = 1e-6  # a correct sampler fails this test once in a million


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


@check(8, 1, "AdditiveAttention with a padding mask (and with scores of thousands)", public=True,
       uses=("AdditiveAttention",))
def public_attention(t):
    w = {"query_proj.weight": randn(t, 5, 3, dtype=F32), "key_proj.weight": randn(t, 5, 4, dtype=F32),
         "key_proj.bias": randn(t, 5, dtype=F32), "score.weight": randn(t, 1, 5, dtype=F32)}
    query, keys = randn(t, 2, 3, dtype=F32), randn(t, 2, 6, 4, dtype=F32)
    mask = torch.tensor([[True] * 6, [True, True, True, False, False, False]])
    loud = dict(w, **{"score.weight": w["score.weight"] * 1000})
    for key, weights_, dtype in (("out", w, F32), ("loud", loud, F64)):
        attention = module(t, t.student.AdditiveAttention, (3, 4, 5), weights_, dtype)
        what = (f"AdditiveAttention(3, 4, 5){' with scores of thousands' if key == 'loud' else ''}(query (2, 3), "
                f"keys (2, 6, 4), {'mask (2, 6)' if key == 'out' else 'no position masked'}, {str(dtype).removeprefix('torch.')})")
        given = mask if key == "out" else torch.ones_like(mask)  # every position: the overflow alone
        context, weights_out = pair(call_pure(attention, query.to(dtype), keys.to(dtype), given, what=what), what)
        expected = t.expected(key, lambda ref: float32_of(reference(ref.AdditiveAttention(3, 4, 5), weights_, F64)(
            query.double(), keys.double(), given)) if dtype == F32 else reference(ref.AdditiveAttention(3, 4, 5),
                                                                                   weights_, F64)(query.double(),
                                                                                                  keys.double(), given))
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == F32 else dict(rtol=1e-7, atol=1e-9)
        note = " (NaN: exp(scores) by hand overflowed; use torch.softmax)" if key == "loud" else ""
        assert_close(weights_out, expected[1], what + " weights" + note, **tol)
        assert_close(context, expected[0], what + " context", **tol)
    query, keys, given = randn(t, 3, 3, dtype=F64), randn(t, 3, 1, 4, dtype=F64), torch.ones(3, 1, dtype=torch.bool)
    what = "AdditiveAttention(3, 4, 5)(query (3, 3), keys (3, 1, 4): one source position, mask (3, 1), float64)"
    context, weights_out = pair(call_pure(module(t, t.student.AdditiveAttention, (3, 4, 5), w, F64), query, keys, given,
                                          what=what), what)
    expected = t.expected("one position", lambda ref: reference(ref.AdditiveAttention(3, 4, 5), w, F64)(query, keys, given))
    assert_close(weights_out, expected[1], what + " weights (B, S) = (3, 1): squeeze only the last axis", rtol=1e-7, atol=1e-9)
    assert_close(context, expected[0], what + " context", rtol=1e-7, atol=1e-9)


def s2s_state(t, V: int, E: int, H: int, A: int, scale: float) -> dict:
    """Random weights for Seq2Seq(V, E, H, A), large enough that its greedy outputs vary with every input."""
    shapes = {"src_embedding.weight": (V, E), "tgt_embedding.weight": (V, E),
              "encoder.cell.weight_ih": (4 * H, E), "encoder.cell.weight_hh": (4 * H, H),
              "encoder.cell.bias_ih": (4 * H,), "encoder.cell.bias_hh": (4 * H,),
              "attention.query_proj.weight": (A, H), "attention.key_proj.weight": (A, H),
              "attention.key_proj.bias": (A,), "attention.score.weight": (1, A),
              "decoder.weight_ih": (4 * H, E + H), "decoder.weight_hh": (4 * H, H),
              "decoder.bias_ih": (4 * H,), "decoder.bias_hh": (4 * H,),
              "out.weight": (V, 2 * H), "out.bias": (V,)}
    return {k: randn(t, *shape, dtype=F32, scale=scale * (shape[-1] ** -0.5 if len(shape) > 1 else 0.3))
            for k, shape in shapes.items()}


@check(8, 1, "Seq2Seq logits and attention weights, and greedy_translate on a random model (rows of different lengths, "
             "cut at </s>; max_len=0)", public=True, uses=("AdditiveAttention", "Seq2Seq", "greedy_translate"),
       needs=("LSTMLayer", "LSTMCell"))
def public_seq2seq(t):
    V, E, H, A = 13, 5, 6, 4
    state = s2s_state(t, V, E, H, A, 2.0)
    src = torch.tensor([[5, 7, 9, 4, 0, 0], [3, 12, 8, 6, 11, 10], [8, 3, 0, 0, 0, 0], [6, 6, 4, 9, 12, 0]])
    tgt_in = torch.tensor([[1, 4, 9, 7, 5], [1, 10, 11, 6, 8], [1, 3, 8, 2, 0], [1, 12, 9, 4, 6]])
    model = module(t, t.student.Seq2Seq, (V, E, H, A), state, F64)
    what = "Seq2Seq(13, 5, 6, 4)(src (4, 6) padded, src != 0, tgt_in (4, 5), float64)"
    logits, attn = pair(call_pure(model, src, src != 0, tgt_in, what=what), what)
    expected = t.expected("forward", lambda ref: reference(ref.Seq2Seq(V, E, H, A), state, F64)(src, src != 0, tgt_in))
    assert_close(attn, expected[1], what + " attention weights (attend with the decoder's h BEFORE the step)",
                 rtol=1e-7, atol=1e-9)
    assert_close(logits, expected[0], what + " logits", rtol=1e-7, atol=1e-9)
    properties.run_generator(t, "Seq2Seq(13, 5, 6, 4)", model, "src (4, 6) padded, src != 0, tgt_in (4, 5), float64",
                             (src, src != 0, tgt_in))
    for max_len in (7, 0):
        what = f"greedy_translate(Seq2Seq(13, 5, 6, 4) with random weights, src (4, 6) padded with 0, max_len={max_len})"
        got = call_pure(t.student.greedy_translate, model, src, max_len, what=what)
        expected = t.expected(f"greedy{max_len}", lambda ref: ref.greedy_translate(
            reference(ref.Seq2Seq(V, E, H, A), state, F64), src, max_len))
        assert_equal(got, expected, what + (" (no step: 4 empty lists)" if not max_len else
                                            " (each row from <s> and the encoder's final state, its own argmax fed "
                                            "back, the mask src != PAD, cut at its own first </s>, which is dropped)"))
    properties.run_device(t, "greedy_translate", t.student.greedy_translate, "Seq2Seq(13, 5, 6, 4) on the device, src "
                          "(4, 6) on the CPU (as callers keep it), max_len=7", (model, src, 7), move_data=False,
                          follows_dtype=False, dtypes=("float64",))
