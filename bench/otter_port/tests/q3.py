"""Q3: causal_mask and padding_mask (public 3, hidden: both masks)."""
import torch
from otter.test_files import test_case

import attention_reference as ref
from port_common import pure

OK_FORMAT = False
name = "q3"
points = None


@test_case(points=1, hidden=False)
def test_public(causal_mask, padding_mask):
    for shape in ((4, 4), (2, 5)):
        got = causal_mask(*shape)
        assert got.dtype == torch.bool, f"causal_mask{shape}: expected bool"
        assert got.tolist() == ref.causal_mask(*shape).tolist(), f"causal_mask{shape}"
    lengths = torch.tensor([3, 1, 5])
    got = pure(padding_mask, lengths, 5)
    assert got.dtype == torch.bool
    assert got.tolist() == ref.padding_mask(lengths, 5).tolist(), "padding_mask(tensor([3, 1, 5]), 5)"


@test_case(points=1.5, hidden=True)
def test_causal_hidden(causal_mask):
    for shape in ((1, 1), (7, 7), (3, 8), (1, 9), (5, 6), (2, 3000)):
        got = causal_mask(*shape)
        assert got.dtype == torch.bool, f"causal_mask{shape}: expected bool"
        T_q, T_k = shape
        expected = (torch.arange(T_k)[None, :] <= torch.arange(T_q)[:, None] + T_k - T_q).tolist()
        assert got.tolist() == expected, f"causal_mask{shape}"
    assert causal_mask(4).tolist() == torch.ones(4, 4, dtype=torch.bool).tril().tolist(), "causal_mask(4)"
    got = causal_mask(3, 5, device="cpu")
    assert got.tolist() == torch.ones(3, 5, dtype=torch.bool).tril(2).tolist(), "causal_mask(3, 5, device='cpu')"


@test_case(points=1.5, hidden=True)
def test_padding_hidden(padding_mask):
    for lengths, T, dtype in (([0, 6, 2, 5], 6, torch.int64), ([1], 3, torch.int64), ([3, 3], 7, torch.int32)):
        got = pure(padding_mask, torch.tensor(lengths, dtype=dtype), T)
        assert got.dtype == torch.bool and got.shape == (len(lengths), T), f"padding_mask({lengths}, {T})"
        assert got.tolist() == [[p < n for p in range(T)] for n in lengths], f"padding_mask({lengths}, {T})"
