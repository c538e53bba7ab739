"""Q6: positions (public 6, hidden: sinusoids, RoPE, RoPE properties, ALiBi slopes and bias)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import (F32, F64, Inputs, assert_close, close, float32_of, gradcheck, pure, reference_module,
                         student_module, true_rope, true_sinusoids, true_slopes)

OK_FORMAT = False
name = "q6"
points = None


@test_case(points=1, hidden=False)
def test_public(sinusoidal_positions, LearnedPositions, apply_rope, alibi_slopes, alibi_bias):
    t = Inputs(601)
    for T, d in ((5, 6), (40, 7)):
        close(sinusoidal_positions(T, d), float32_of(ref.sinusoidal_positions(T, d, dtype=F64)),
              f"sinusoidal_positions({T}, {d})")
    state = {"table.weight": t.randn(7, 4, dtype=F32)}
    module = student_module(LearnedPositions, (7, 4), state, F32)
    x = t.randn(2, 5, 4, dtype=F32)
    expected = float32_of(reference_module(ref.LearnedPositions(7, 4), state, F64)(x.double()))
    close(pure(module, x), expected, "LearnedPositions(7, 4)")
    x = t.randn(2, 3, 5, 4)
    positions = torch.tensor([6, 0, 2, 3000, 9])
    for kwargs in ({}, {"positions": positions, "base": 100.0}):
        close(pure(apply_rope, x, **kwargs), ref.apply_rope(x, **kwargs), f"apply_rope {kwargs}", F64)
    for n in (4, 6):
        assert_close(alibi_slopes(n), ref.alibi_slopes(n), f"alibi_slopes({n})", rtol=1e-6)
    assert_close(alibi_bias(4, 3, 5), ref.alibi_bias(4, 3, 5), "alibi_bias(4, 3, 5)", rtol=1e-6)


@test_case(points=1.5, hidden=True)
def test_sinusoidal_hidden(sinusoidal_positions):
    for T, d in ((11, 8), (1, 6), (50, 16), (9, 7), (3000, 10)):
        got = sinusoidal_positions(T, d)
        assert got.dtype == F32 and got.shape == (T, d), f"sinusoidal_positions({T}, {d})"
        assert_close(got, true_sinusoids(T, d), f"sinusoidal_positions({T}, {d})", rtol=1e-5, atol=1e-5 + 5e-7 * T)


@test_case(points=1.5, hidden=True)
def test_rope_hidden(apply_rope):
    t = Inputs(603)
    x = t.randn(2, 3, 5, 8)
    positions = torch.tensor([7, 0, 3, 12, 4])
    far = torch.tensor([4000, 17, 2500, 9999, 1])
    for label, args, kwargs, expected in (
            ("", (x,), {}, true_rope(x)),
            ("positions", (x, positions), {}, true_rope(x, positions)),
            ("base=500", (x,), {"base": 500.0}, true_rope(x, None, 500.0)),
            ("positions, base=500", (x,), {"positions": positions, "base": 500.0}, true_rope(x, positions, 500.0)),
            ("far positions", (x, far), {}, true_rope(x, far))):
        got = pure(apply_rope, *args, **kwargs)
        assert got.dtype == F64 and got.shape == x.shape, label
        assert_close(got, expected, label, rtol=1e-7, atol=1e-7 if label != "far positions" else 1e-6)
    x32 = t.randn(3, 6, 10, dtype=F32)
    got = pure(apply_rope, x32)
    assert got.dtype == F32
    assert_close(got, true_rope(x32), "apply_rope float32", rtol=1e-5, atol=1e-5)
    gradcheck(apply_rope, [x[0], positions], [0], "apply_rope(x, positions)", ref.apply_rope)


@test_case(points=1, hidden=True)
def test_rope_properties(apply_rope):
    t = Inputs(604)
    x = t.randn(3, 6, 10)
    assert_close(pure(apply_rope, x).norm(dim=-1), x.norm(dim=-1), "rotations keep norms")
    q, k = t.randn(1, 10), t.randn(1, 10)
    scores = [float((apply_rope(q, torch.tensor([m])) * apply_rope(k, torch.tensor([n]))).sum())
              for m, n in ((5, 2), (9, 6), (40, 37), (3003, 3000))]
    assert_close(scores[1:], [scores[0]] * 3, "q.k depends only on m - n", rtol=1e-6, atol=1e-6)


@test_case(points=1, hidden=True)
def test_alibi_hidden(alibi_slopes, alibi_bias):
    for n in (8, 16, 2, 1, 6, 12, 5):
        assert_close(alibi_slopes(n), torch.tensor(true_slopes(n), dtype=F64), f"alibi_slopes({n})", rtol=1e-6)
    for h, T_q, T_k in ((4, 3, 6), (8, 5, 5), (6, 1, 9)):
        slopes = torch.tensor(true_slopes(h), dtype=F64)
        offsets = torch.arange(T_k)[None, :] - (torch.arange(T_q)[:, None] + T_k - T_q)
        assert_close(alibi_bias(h, T_q, T_k), slopes[:, None, None] * offsets, f"alibi_bias({h}, {T_q}, {T_k})",
                     rtol=1e-6)
