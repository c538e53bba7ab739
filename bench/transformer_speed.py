"""The reference Transformer's cost against torch built-ins, and what the KV cache buys.

1. One training step (forward, backward) of the reference `TransformerLM` against the same model
   built from torch built-ins (`nn.LayerNorm`, `F.scaled_dot_product_attention`, `F.gelu`) holding
   the very same weights (checked: equal logits), as a time ratio, CPU float32, one thread.
2. Greedy generation with the reference `generate`, with and without the KV cache, from a prompt
   of 8 tokens to a few total lengths, as a speed-up (and checked: the same tokens).

Run: .venv/bin/python bench/transformer_speed.py [--device cuda]
"""
import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from autograder.authoring import assignments

ROOT = Path(__file__).resolve().parents[1]
ref = assignments.get("transformer").reference()


class BuiltinAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = (p(x).view(B, T, self.h, d // self.h).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, d))


class BuiltinMLP(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc, self.proj = nn.Linear(d, d_ff), nn.Linear(d_ff, d)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class BuiltinBlock(nn.Module):
    def __init__(self, d, h, d_ff):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(d), BuiltinAttention(d, h)
        self.norm2, self.mlp = nn.LayerNorm(d), BuiltinMLP(d, d_ff)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class BuiltinLM(nn.Module):
    """The reference's architecture and parameter names, from built-ins."""

    def __init__(self, vocab_size, d_model, n_layers, n_heads, d_ff, max_len):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab_size, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList([BuiltinBlock(d_model, n_heads, d_ff) for _ in range(n_layers)])
        self.norm_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm_f(x))


def timed(fn, repeat):
    fn()  # warm-up
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def train_step_ratio(device):
    print("training step (forward + backward), float32; ratio = reference / built-ins")
    for cfg, (B, T), repeat in ((dict(vocab_size=65, d_model=64, n_layers=2, n_heads=4, d_ff=256, max_len=64), (16, 64), 20),
                                (dict(vocab_size=65, d_model=256, n_layers=4, n_heads=8, d_ff=1024, max_len=256), (8, 256), 5),
                                (dict(vocab_size=512, d_model=512, n_layers=6, n_heads=8, d_ff=2048, max_len=512), (4, 512), 2)):
        torch.manual_seed(0)
        ours = ref.TransformerLM(**cfg).to(device)
        theirs = BuiltinLM(**cfg).to(device)
        theirs.load_state_dict(ours.state_dict())
        idx = torch.randint(0, cfg["vocab_size"], (B, T), device=device)
        with torch.no_grad():
            assert torch.allclose(ours(idx), theirs(idx), atol=1e-4), "the built-in model disagrees"

        def step(model):
            def run():
                model.zero_grad()
                loss = F.cross_entropy(model(idx).flatten(0, 1), idx.flatten())
                loss.backward()
            return run

        a, b = timed(step(ours), repeat), timed(step(theirs), repeat)
        print(f"  d={cfg['d_model']:4d} layers={cfg['n_layers']} (B, T)=({B}, {T}): reference {a * 1e3:8.1f} ms, "
              f"built-ins {b * 1e3:8.1f} ms, ratio {a / b:.2f}x", flush=True)


def cache_speedup(device):
    print("greedy generation from an 8-token prompt, float32, batch 1: speed-up of the KV cache")
    cfg = dict(vocab_size=65, d_model=256, n_layers=4, n_heads=8, d_ff=1024, max_len=512)
    torch.manual_seed(0)
    model = ref.TransformerLM(**cfg).to(device).eval()
    prompt = torch.randint(0, 65, (1, 8), device=device)
    for total in (64, 256, 512):
        n = total - 8
        with_cache = ref.generate(model, prompt, n, temperature=0, use_cache=True)
        without = ref.generate(model, prompt, n, temperature=0, use_cache=False)
        same = torch.equal(with_cache, without)
        a = timed(lambda: ref.generate(model, prompt, n, temperature=0, use_cache=True), 1)
        b = timed(lambda: ref.generate(model, prompt, n, temperature=0, use_cache=False), 1)
        print(f"  {total:5d} tokens: with cache {a:7.3f} s, recomputing {b:7.3f} s, speed-up {b / a:5.1f}x "
              f"(same tokens: {same})", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    print(f"device {args.device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    train_step_ratio(args.device)
    cache_speedup(args.device)


if __name__ == "__main__":
    sys.exit(main())
