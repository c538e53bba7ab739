"""How much room the rnn_lm Q7 and Q8 thresholds leave, and how far genuine runs keep their start.

Q7: the grader loads this submission's own secret initial weights into the student's RNNLM, runs
the student's `train_lm` with fixed settings, and passes it when the test-play perplexity is at
most the reference's (threshold run: initial weights of seed Q7_INIT_SEED, same settings) times
1 + PPL_MARGIN. A correct student differs from the reference by float rounding and, since every
submission starts elsewhere, by its start. This prints, as ratios to the threshold run: the
reference from other starts, correct variants written differently, and buggy or weaker ones.

Q8: exact-match accuracy of the weights trained by the reference and by variants from several
starts and data draws, decoded by the reference as the grader does, on 500 fresh digit strings,
against the fixed Q8_MIN_ACCURACY.

Provenance (both; `autograder.checking.provenance.assert_descends`): for every run above, the smallest and the
mean share, over the matrices of the reference's start profile, of the correlation with its start
that the reference's own run keeps (the check passes at START_LEAST and START_MEAN); the largest
|correlation| of a run from another start with the grader's start (a pasted model); and a pasted
model trained twice as long elsewhere, blended with just enough of the grader's start for every
profiled matrix to keep a given share, scored like a submission: the cheapest way round the
statistic, which must cost more than the threshold's margin where it passes provenance.

Each training runs on one thread, as in the grader's worker.
Run: .venv/bin/python bench/rnn_lm_thresholds.py [q7|q8]   (about ten minutes on an idle machine)

Spread (what sets each threshold): correct variants written differently x starts, each figure and
their range; `sqrt_error_tail` and `normal_tail` turn them into a false-fail rate at a threshold.
Run: .venv/bin/python bench/rnn_lm_thresholds.py spread q8|q7 [start ...]   (q8: 40 runs, about 4 min;
q7: 12 runs at starts 301-303, about 5 min)
"""
import sys
import time
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.checking.provenance import start_correlations, start_profile, start_shares  # noqa: E402
from reference_variants import blend_toward, modules  # noqa: E402 - bench/ is on sys.path when run as a script

ref, hidden, variant = modules("rnn_lm")
STARTS = [101, 102, 103, 104, 105, 106]  # stand-ins for submissions' secret starts
BLENDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)  # shares of the profile a blended pasted model is made to keep


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


def q7_start(seed: int) -> dict:
    vocab, _, _ = hidden.char_data()
    torch.manual_seed(seed)
    return {k: v.detach().clone() for k, v in hidden.q7_model(ref, len(vocab)).state_dict().items()}


def q7_run(module, start: dict, **overrides) -> tuple:
    """(test perplexity, trained state) of module's train_lm from `start`."""
    vocab, train_ids, test_ids = hidden.char_data()
    model = module.RNNLM(len(vocab), **hidden.Q7_MODEL, layer=module.LSTMLayer)
    model.load_state_dict(start)
    module.train_lm(model, train_ids, **{**hidden.Q7_SETTINGS, **overrides})
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return hidden.test_perplexity(state, test_ids), state


def kept(start, final, profile) -> str:
    """The smallest and the mean share kept (provenance.start_shares, what assert_descends bounds), as "least/mean"."""
    shares = list(start_shares(start, final, profile).values())
    return f"{min(shares):.2f}/{sum(shares) / len(shares):.2f}"


def passes_provenance(share: float) -> bool:
    """A blend that keeps `share` of every matrix's profile (then least = mean = share)."""
    return share >= hidden.START_LEAST and share >= hidden.START_MEAN


def max_abs_corr(start, final) -> float:
    return max(abs(c) for c in start_correlations(start, final).values())


def q7() -> None:
    start = time.process_time()
    threshold = q7_start(hidden.Q7_INIT_SEED)
    base, state = q7_run(ref, threshold)
    profile = start_profile(threshold, state)
    took = time.process_time() - start
    limit = 1 + hidden.PPL_MARGIN
    print(f"Q7 threshold run (init seed {hidden.Q7_INIT_SEED}): test perplexity {base:.3f} per character "
          f"(threshold x{limit:.2f} = {base * limit:.3f}); one run {took:.1f} s CPU", flush=True)
    rows = {"reference": (ref, STARTS, {})}
    for name, module in Q7_VARIANTS.items():
        overrides = {} if module else {"steps": hidden.Q7_SETTINGS["steps"] // 2}
        rows[name] = (module or ref, STARTS[:2], overrides)
    trained = {}
    for name, (module, seeds, overrides) in rows.items():
        figures = []
        for seed in seeds:
            ppl, state = q7_run(module, q7_start(seed), **overrides)
            figures.append((ppl / base, kept(q7_start(seed), state, profile)))
            if module is ref and not overrides:
                trained[seed] = state
        print(f"  {name:40s} starts {seeds}: ratio " + " ".join(f"{r:.3f}" for r, _ in figures)
              + f" (max {max(r for r, _ in figures):.3f}); share kept (least/mean) "
              + " ".join(c for _, c in figures), flush=True)
    print(f"(ratios to the threshold run; pass when <= {limit:.2f}. Provenance passes when every matrix keeps >= "
          f"{hidden.START_LEAST} of the profile and all >= {hidden.START_MEAN} on average; profile: "
          + ", ".join(f"{k} {v:.2f}" for k, v in profile.items()) + ")")
    vocab, _, test_ids = hidden.char_data()
    grader_start = q7_start(STARTS[1])
    print(f"  pasted: a run from start {STARTS[0]} against start {STARTS[1]}: max |correlation| "
          f"{max_abs_corr(grader_start, trained[STARTS[0]]):.3f}")
    ppl, pasted = q7_run(ref, q7_start(STARTS[0]), steps=2 * hidden.Q7_SETTINGS["steps"])
    print(f"  pasted, trained twice as long from start {STARTS[0]}: ratio {ppl / base:.3f}, share kept (least/mean) "
          f"{kept(grader_start, pasted, profile)}; blended with the grader's start until every matrix keeps a share of:")
    for share in BLENDS:
        blended = blend_toward(pasted, grader_start, {k: share * v for k, v in profile.items()})
        ratio = hidden.test_perplexity(blended, test_ids) / base
        print(f"    {share:.1f}: ratio {ratio:.3f} ({'passes' if ratio <= limit else 'fails'} the threshold; "
              f"{'passes' if passes_provenance(share) else 'fails'} provenance)", flush=True)


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


def q8_run(module, seed: int, **overrides) -> tuple:
    """(accuracy, start, trained state): module's Seq2Seq from start `seed` on data drawn from `seed`, decoded by
    the reference on 500 fresh strings, as the check does."""
    start = hidden.s2s_weights(ref, seed, **hidden.Q8_MODEL)
    model = module.Seq2Seq(hidden.S2S_VOCAB, **hidden.Q8_MODEL)
    model.load_state_dict(start)
    rng = np.random.default_rng(seed)
    settings = {**hidden.Q8_SETTINGS, **overrides}
    src, tgt = hidden.digit_pairs(rng, settings["steps"] * settings["batch_size"])
    module.train_seq2seq(model, src, tgt, **settings)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return q8_accuracy(state, rng), start, state


def q8_accuracy(state: dict, rng) -> float:
    trained = hidden.s2s_reference(ref, state, torch.float32, **hidden.Q8_MODEL)
    test_src, test_tgt = hidden.digit_pairs(rng, hidden.Q8_EVAL)
    return hidden.exact_match(ref.greedy_translate(trained, test_src, hidden.S2S_MAX + 1), test_tgt)


def q8() -> None:
    profile = hidden.reference_q8_start(ref)
    print(f"Q8 exact match on {hidden.Q8_EVAL} fresh strings (pass when >= {hidden.Q8_MIN_ACCURACY:.2f}); provenance "
          f"passes when every matrix keeps >= {hidden.START_LEAST} of the profile and all >= {hidden.START_MEAN} "
          "on average: "
          + ", ".join(f"{k} {v:.2f}" for k, v in profile.items()))
    trained = {}
    for name, module in Q8_VARIANTS.items():
        seeds = STARTS if module is ref else STARTS[:3]
        start = time.process_time()
        runs = [q8_run(module, s) for s in seeds]
        if module is ref:
            trained = {s: run for s, run in zip(seeds, runs)}
        print(f"  {name:40s} starts {seeds}: accuracy " + " ".join(f"{a:.3f}" for a, _, _ in runs)
              + f" (min {min(a for a, _, _ in runs):.3f}); share kept (least/mean) "
              + " ".join(kept(s, f, profile) for _, s, f in runs)
              + f" ({(time.process_time() - start) / len(seeds):.1f} s CPU per run)", flush=True)
    _, grader_start, _ = trained[STARTS[1]]
    print(f"  pasted: a run from start {STARTS[0]} against start {STARTS[1]}: max |correlation| "
          f"{max_abs_corr(grader_start, trained[STARTS[0]][2]):.3f}")
    accuracy, _, pasted = q8_run(ref, STARTS[0], steps=2 * hidden.Q8_SETTINGS["steps"])
    print(f"  pasted, trained twice as long from start {STARTS[0]}: accuracy {accuracy:.3f}, share kept (least/mean) "
          f"{kept(grader_start, pasted, profile)}; blended with the grader's start until every matrix keeps a share of:")
    for share in BLENDS:
        blended = blend_toward(pasted, grader_start, {k: share * v for k, v in profile.items()})
        accuracy = q8_accuracy(blended, np.random.default_rng(999))
        print(f"    {share:.1f}: accuracy {accuracy:.3f} ({'passes' if accuracy >= hidden.Q8_MIN_ACCURACY else 'fails'} "
              f"the threshold; {'passes' if passes_provenance(share) else 'fails'} provenance)", flush=True)


if __name__ == "__main__" and sys.argv[1:2] != ["spread"]:
    which = sys.argv[1:] or ["q7", "q8"]
    if "q8" in which:
        q8()
    if "q7" in which:
        q7()


# ---- the spread of correct runs: what sets each threshold ---------------------------------------
# Correct variants written differently (each also in tests/test_rnn_lm_variants.py): their float32
# trajectories part from the reference's after a few hundred steps (other kernels, other summation
# orders), so the threshold must hold for the spread over variants x starts, not for the reference alone.
LSTM_LOOP = ("        outputs = []\n        for t in range(x.size(1)):\n            state = self.cell(x[:, t], state)\n"
             "            outputs.append(state[0])\n        return torch.stack(outputs, dim=1), state\n")
PREALLOCATED = (LSTM_LOOP, "        B, T = x.shape[:2]\n        out = x.new_empty(B, T, self.cell.hidden_size)  # (B, T, H)\n"
                           "        for t in range(T):\n            state = self.cell(x[:, t], state)\n"
                           "            out[:, t] = state[0]\n        return out, state\n")
S2S_LOSS = "        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=PAD)"
SPREAD_VARIANTS = {
    "reference": ref,
    "LSTMLayer into a preallocated output": variant(PREALLOCATED),
    "LSTM gates by slicing, addmm": variant((CELL, (
        "        H = self.hidden_size\n"
        "        gates = torch.addmm(self.bias_ih, x, self.weight_ih.t()) + torch.addmm(self.bias_hh, h, self.weight_hh.t())\n"
        "        i, f, g, o = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]"))),
    "losses by log_softmax and gather": variant(
        (LOSS, "        logp = torch.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n"
               "        loss = -logp.gather(1, targets.reshape(-1, 1)).mean()"),
        (S2S_LOSS, "        logp = torch.log_softmax(logits, -1).reshape(-1, logits.size(-1))\n"
                   "        keep = (y.reshape(-1) != PAD).to(logp.dtype)\n"
                   "        loss = -(logp.gather(1, y.reshape(-1, 1))[:, 0] * keep).sum() / keep.sum()")),
}
SPREAD_STARTS = list(range(301, 311))


def normal_tail(values, threshold: float, below: bool) -> float:
    """The false-fail rate of a normal fitted to `values` at `threshold` (the probability beyond it)."""
    import math
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    z = (mean - threshold) / sd if below else (threshold - mean) / sd
    return 0.5 * math.erfc(z / math.sqrt(2))


def spread(which: str, starts: list) -> None:
    """Every correct variant from every start: each figure, their range, and the threshold's false-fail rate."""
    values = []
    for name, module in SPREAD_VARIANTS.items():
        got = []
        for seed in starts:
            t0 = time.process_time()
            if which == "q8":
                got.append(q8_run(module, seed)[0])
            else:
                got.append(q7_run(module, q7_start(seed))[0])
            print(f"  {which} {name:40s} start {seed}: {got[-1]:.4f} ({time.process_time() - t0:.1f} s CPU)", flush=True)
        values += got
        print(f"{which} {name}: " + " ".join(f"{v:.4f}" for v in got), flush=True)
    print(f"{which}: {len(values)} correct runs, min {min(values):.4f}, max {max(values):.4f}, "
          f"mean {np.mean(values):.4f}, sd {np.std(values, ddof=1):.4f}", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["spread"]:
    spread(sys.argv[2], [int(s) for s in sys.argv[3:]] or SPREAD_STARTS)


def sqrt_error_tail(accuracies, threshold: float) -> float:
    """The false-fail rate at `threshold` of a normal fitted to sqrt(1 - accuracy): exact match has a long lower
    tail over starts (most runs near 1, a few far below), which the square root of the error rate makes symmetric."""
    import math
    e = np.sqrt(1 - np.asarray(accuracies, dtype=float))
    z = (math.sqrt(1 - threshold) - e.mean()) / e.std(ddof=1)
    return 0.5 * math.erfc(z / math.sqrt(2))
