"""The reference MultiHeadAttention (solutions/attention.py) against PyTorch's own, forward + backward.

Peers, measured in the same run on the same inputs and weights, CPU float32, one thread:
  * nn.MultiheadAttention (batch_first, need_weights=False), and
  * the same projections around F.scaled_dot_product_attention (PyTorch's fused kernel).
Prints milliseconds per forward+backward (median of repeats) and the ratio reference / peer.
The reference is written for reading, not speed: the ratios say what clarity costs.

Run: .venv/bin/python bench/attention_speed.py
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from autograder.authoring import assignments

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(8, 64, 128, 4), (8, 256, 256, 8), (4, 512, 512, 8)]  # (B, T, d_model, heads)
REPEATS = 15


def load_reference():
    return assignments.get("attention").reference()


def sdpa_mha(ref_module, heads):
    """The reference's weights, attention by PyTorch's fused kernel."""
    def forward(x, mask):
        B, T, d = x.shape
        q, k, v = (p(x).view(B, T, heads, d // heads).transpose(1, 2)
                   for p in (ref_module.q_proj, ref_module.k_proj, ref_module.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return ref_module.out_proj(out.transpose(1, 2).reshape(B, T, d))
    return forward


def timed(fn, x) -> float:
    times = []
    for _ in range(REPEATS):
        x.grad = None
        start = time.perf_counter()
        fn(x).sum().backward()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    torch.set_num_threads(1)
    ref = load_reference()
    print(f"torch {torch.__version__}, CPU float32, 1 thread, causal mask, median of {REPEATS}")
    print(f"{'B':>3} {'T':>5} {'d':>5} {'h':>3} {'reference ms':>13} {'nn.MHA ms':>10} {'SDPA ms':>8} "
          f"{'ref/nn.MHA':>11} {'ref/SDPA':>9}")
    for B, T, d, h in SIZES:
        torch.manual_seed(0)
        mine = ref.MultiHeadAttention(d, h)
        builtin = nn.MultiheadAttention(d, h, batch_first=True)
        with torch.no_grad():
            builtin.in_proj_weight.copy_(torch.cat([mine.q_proj.weight, mine.k_proj.weight, mine.v_proj.weight]))
            builtin.in_proj_bias.copy_(torch.cat([mine.q_proj.bias, mine.k_proj.bias, mine.v_proj.bias]))
            builtin.out_proj.load_state_dict(mine.out_proj.state_dict())
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        x = torch.randn(B, T, d, requires_grad=True)
        fused = sdpa_mha(mine, h)
        ours = timed(lambda x: mine(x, None, mask), x)
        theirs = timed(lambda x: builtin(x, x, x, attn_mask=~mask, need_weights=False)[0], x)
        kernel = timed(lambda x: fused(x, mask), x)
        assert torch.allclose(mine(x, None, mask), fused(x, mask), atol=1e-5)
        print(f"{B:>3} {T:>5} {d:>5} {h:>3} {ours:>13.2f} {theirs:>10.2f} {kernel:>8.2f} "
              f"{ours / theirs:>11.2f} {ours / kernel:>9.2f}")


if __name__ == "__main__":
    main()
