"""How much room the rnn_lm Q7 perplexity threshold and the Q8 accuracy threshold leave.

Q7: the grader loads its own initial weights (seed Q7_INIT_SEED) into the student's RNNLM, runs the
student's `train_lm` with fixed settings, and passes it when the test-play perplexity is at most
the reference's (same weights, same settings) times 1 + PPL_MARGIN. Training is deterministic, so
a correct student differs from the reference only by float rounding (other operation orders), which
grows over 400 SGD steps like a change of seed would. This prints, as ratios to the reference at
the grader's init: the reference from other initial weights, correct variants written differently,
and buggy or weaker ones that should fail.

Q8: exact-match accuracy of the weights trained by the reference and by variants, decoded by the
reference as the grader does, on 500 fresh digit strings over several data seeds, against the fixed
Q8_MIN_ACCURACY.

Each training runs on one thread, as in the grader's worker.
Run: .venv/bin/python bench/rnn_lm_thresholds.py [q7|q8]   (about ten minutes on an idle machine)
"""
import sys
import time
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))



from reference_variants import modules  # noqa: E402 - bench/ is on sys.path when run as a script

ref, hidden, variant = modules("rnn_lm")


CELL = ("        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4H)\n"
        "        i, f, g, o = gates.chunk(4, dim=-1)")
LOSS = "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))"
CLIP = "    if total > max_norm:\n        for g in grads:\n            g.mul_(max_norm / (total + 1e-6))"
Q7_VARIANTS = {
    "correct: gates by slicing, addmm": variant((CELL, (
        "        H = self.hidden_size\n"
        "        gates = torch.addmm(self.bias_ih, x, self.weight_ih.t()) + torch.addmm(self.bias_hh, h, self.weight_hh.t())\n"
        "        i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]"))),
    "correct: log_softmax loss, clamped clip": variant(
        (LOSS, "        logp = torch.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n"
               "        loss = -logp.gather(1, targets.reshape(-1, 1)).mean()"),
        (CLIP, "    factor = torch.clamp(max_norm / (total + 1e-6), max=1.0)\n    for g in grads:\n        g.mul_(factor)")),
    "bug: state reset at every chunk": variant(("        logits, state = model(inputs, detach_state(state))",
                                                "        logits, state = model(inputs)")),
    "bug: clipping each parameter alone": variant((CLIP, (
        "    for g in grads:\n        if g.norm() > max_norm:\n            g.mul_(max_norm / (g.norm() + 1e-6))"))),
    "weak: half the steps": None,
}


def q7_perplexity(module, init_seed: int, **overrides) -> float:
    vocab, train_ids, test_ids = hidden.char_data()
    torch.manual_seed(init_seed)
    init = ref.RNNLM(len(vocab), **hidden.Q7_MODEL, layer=ref.LSTMLayer).state_dict()
    model = module.RNNLM(len(vocab), **hidden.Q7_MODEL, layer=module.LSTMLayer)
    model.load_state_dict(init)
    module.train_lm(model, train_ids, **{**hidden.Q7_SETTINGS, **overrides})
    return hidden.test_perplexity(model.state_dict(), test_ids)


def q7() -> None:
    start = time.process_time()
    base = q7_perplexity(ref, hidden.Q7_INIT_SEED)
    took = time.process_time() - start
    print(f"Q7 reference, grader's init seed {hidden.Q7_INIT_SEED}: test perplexity {base:.3f} per character "
          f"(threshold x{1 + hidden.PPL_MARGIN:.2f} = {base * (1 + hidden.PPL_MARGIN):.3f}); one run {took:.1f} s CPU",
          flush=True)
    seeds = [hidden.Q7_INIT_SEED + 1 + i for i in range(3)]
    rows = {"reference, other initial weights": (ref, seeds, {})}
    for name, module in Q7_VARIANTS.items():
        overrides = {} if module else {"steps": hidden.Q7_SETTINGS["steps"] // 2}
        rows[name] = (module or ref, [hidden.Q7_INIT_SEED] + seeds[:1], overrides)
    for name, (module, row_seeds, overrides) in rows.items():
        ratios = [q7_perplexity(module, s, **overrides) / base for s in row_seeds]
        print(f"  {name:40s} seeds {row_seeds}: " + " ".join(f"{r:.3f}" for r in ratios) + f"  max {max(ratios):.3f}",
              flush=True)
    print(f"(ratios to the reference at the grader's init; pass when <= {1 + hidden.PPL_MARGIN:.2f})")


ATTN = "        weights = torch.softmax(scores, dim=-1)  # (B, S)"
Q8_VARIANTS = {
    "reference": ref,
    "correct: attention scores by einsum": variant((
        "        scores = self.score(torch.tanh(self.query_proj(query)[:, None, :] + self.key_proj(keys))).squeeze(-1)  # (B, S)",
        "        hidden = torch.tanh(self.query_proj(query).unsqueeze(1) + self.key_proj(keys))\n"
        "        scores = torch.einsum(\"bsa,a->bs\", hidden, self.score.weight[0])")),
    "bug: loss over padding too": variant(("ignore_index=PAD)", ")")),
    "bug: no attention mask": variant(("        if mask is not None:\n            scores = scores.masked_fill(~mask, float(\"-inf\"))\n", "")),
    "bug: attention over the batch": variant((ATTN, ATTN.replace("dim=-1", "dim=0"))),
}


def q8() -> None:
    seeds = [0, 1, 2]
    print(f"Q8 exact match on {hidden.Q8_EVAL} fresh strings (pass when >= {hidden.Q8_MIN_ACCURACY:.2f}), data seeds {seeds}")
    for name, module in Q8_VARIANTS.items():
        start = time.process_time()
        accs = [hidden.q8_accuracy_of(module, np.random.default_rng(s), decoder=ref) for s in seeds]
        print(f"  {name:40s} " + " ".join(f"{a:.3f}" for a in accs) + f"  min {min(accs):.3f} "
              f"({(time.process_time() - start) / len(seeds):.1f} s CPU per run)", flush=True)


if __name__ == "__main__":
    which = sys.argv[1:] or ["q7", "q8"]
    if "q8" in which:
        q8()
    if "q7" in which:
        q7()
