"""How much room the transformer Q6 and Q8 thresholds leave, measured over seeds and correct variants.

The grader trains the student's `train_lm` (Shakespeare, synthetic language) and `train_seq2seq`
(sorting) with fixed settings and one seed, and passes them when the figure is within a margin of
the reference's with the same settings and seed. A correct student draws random numbers
differently from the reference, which is like another seed, so this prints the reference over
three other seeds and two correct variants, as ratios to the reference at the grader's seed
(accuracy as a difference). Every run is single-threaded, as in the grader's worker.

Run: .venv/bin/python bench/transformer_thresholds.py   (about 8 minutes on an idle core)
"""
import sys
import time
from pathlib import Path

import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from reference_variants import modules  # noqa: E402 - bench/ is on sys.path when run as a script

ref, hidden, variant = modules("transformer")


VARIANTS = {
    "correct: batches from another generator": variant(
        ('    generator = torch.Generator().manual_seed(s["seed"])\n    losses = []\n',
         '    generator = torch.Generator().manual_seed(s["seed"] + 7)\n    losses = []\n'),
        ('    generator = torch.Generator().manual_seed(s["seed"])\n    bos =',
         '    generator = torch.Generator().manual_seed(s["seed"] + 7)\n    bos =')),
    "correct: torch-style AdamW, log-softmax loss": variant(
        ("    m_hat = m / (1 - beta1 ** step)\n    v_hat = v / (1 - beta2 ** step)\n"
         "    param = param - lr * weight_decay * param - lr * m_hat / (v_hat.sqrt() + eps)\n",
         "    denom = v.sqrt() / math.sqrt(1 - beta2 ** step) + eps\n"
         "    param = param * (1 - lr * weight_decay) - (lr / (1 - beta1 ** step)) * m / denom\n"),
        ("        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))\n        optimizer.zero_grad()\n"
         "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
         "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses",
         "        logp = torch.log_softmax(logits, dim=-1)\n"
         "        loss = -logp.gather(-1, y[..., None]).mean()\n        optimizer.zero_grad()\n"
         "        loss.backward()\n        clipped, _ = clip_grads([p.grad for p in params], s[\"grad_clip\"])\n"
         "        for p, g in zip(params, clipped):\n            p.grad = g\n        optimizer.step(lr)\n        losses")),
}


def shakespeare(module, seed):
    train, test = hidden.shakespeare_ids()
    state, _ = module.train_lm(train, hidden.shakespeare_config(), dict(hidden.SHAKESPEARE_SETTINGS, seed=seed))
    import math
    return math.exp(hidden.stream_nll(ref, state, hidden.shakespeare_config(), test,
                                      hidden.SHAKESPEARE_SETTINGS["block_size"], hidden.EVAL_STRIDE))


def synthetic(module, seed):
    language, train = hidden.synthetic_language()
    state, _ = module.train_lm(train, hidden.synthetic_config(language), dict(hidden.SYNTHETIC_SETTINGS, seed=seed))
    ppl, floor = hidden.synthetic_ratio(ref, state, heldout_seed=1000 + seed)
    return ppl / floor


def sorting(module, seed):
    src, tgt = hidden.sort_pairs(hidden.SORT_TRAIN, 0)
    state = module.train_seq2seq(src, tgt, hidden.SORT_CONFIG, dict(hidden.SORT_SETTINGS, seed=seed))
    return hidden.sort_accuracy(ref, state, seed=2000 + seed)


TASKS = {  # name: (run, grader's seed, margin, higher is better)
    "shakespeare perplexity": (shakespeare, hidden.SHAKESPEARE_SETTINGS["seed"], hidden.SHAKESPEARE_MARGIN, False),
    "synthetic perplexity / Bayes floor": (synthetic, hidden.SYNTHETIC_SETTINGS["seed"], hidden.SYNTHETIC_MARGIN, False),
    "sorting exact-match accuracy": (sorting, hidden.SORT_SETTINGS["seed"], hidden.SORT_MARGIN, True),
}


def main():
    for task, (run, seed, margin, higher) in TASKS.items():
        start = time.process_time()
        base = run(ref, seed)
        took = time.process_time() - start
        limit = f"accuracy >= {base - margin:.3f}" if higher else f"<= x{1 + margin:.2f} = {base * (1 + margin):.3f}"
        print(f"\n{task}: reference at the grader's seed {seed}: {base:.4f} ({limit}); one run {took:.1f} s CPU")
        seeds = [seed + 10 + i for i in range(3)]
        print(f"{'':48s}" + "".join(f"{s:>9d}" for s in seeds) + "    worst")
        for name, module in {"reference, other seeds": ref, **VARIANTS}.items():
            figures = [run(module, s) for s in seeds]
            shown = [f - base for f in figures] if higher else [f / base for f in figures]
            worst = min(shown) if higher else max(shown)
            print(f"{name:48s}" + "".join(f"{x:9.4f}" for x in shown) + f"{worst:9.4f}", flush=True)
        print("(differences from the reference's accuracy; pass when >= -margin)" if higher else
              "(ratios to the reference at the grader's seed; pass when <= 1 + margin)")


if __name__ == "__main__":
    main()
