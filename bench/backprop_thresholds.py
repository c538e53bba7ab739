"""How much room the backprop Q6 perplexity threshold leaves, measured over several seeds.

The grader trains the student's `train_ffnn` with fixed settings and one seed and passes it when
its perplexity on the test plays is at most the reference's (same settings, same seed) plus
PPL_MARGIN. A correct student's code draws its random numbers differently from the reference, which
is like another seed, so this prints the reference over five seeds and correct variants that
use their randomness differently, and buggy or weaker ones that should fail, all as ratios to the
reference at the grader's seed. Each training run is single-threaded, as in the grader's worker.

The last row trains on the test plays themselves, which no honest run can: the grader flags a
perplexity below FLOOR_RATIO times the reference as having seen the test text.

Run: .venv/bin/python bench/backprop_thresholds.py   (about five minutes; --cheat-only: the last row)
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: as in the worker
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from reference_variants import modules  # noqa: E402 - bench/ is on sys.path when run as a script

ref, hidden, variant = modules("backprop")


SAMPLING = "        batch = rng.integers(0, len(targets), size=batch_size)\n"
VARIANTS = {
    "correct: epochs of shuffled positions": variant((
        "    rng = np.random.default_rng(seed + 1)\n",
        "    rng = np.random.default_rng(seed + 1)\n    order, at = rng.permutation(len(targets)), 0\n"), (
        SAMPLING,
        "        if at + batch_size > len(order):\n            order, at = rng.permutation(len(targets)), 0\n"
        "        batch, at = order[at:at + batch_size], at + batch_size\n")),
    "correct: batches from another stream": variant((
        "    rng = np.random.default_rng(seed + 1)\n", "    rng = np.random.default_rng(seed + 7)\n")),
    "correct: init drawn in another order": variant((
        '        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n'
        '        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim)) / np.sqrt(context * dim),\n',
        '        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim)) / np.sqrt(context * dim),\n'
        '        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n')),
    "bug: tanh derivative 1 - h": variant(("return dout * (1.0 - h ** 2)", "return dout * (1.0 - h)")),
    "bug: embedding backward assigns": variant(("    np.add.at(dE, ids, dout)\n", "    dE[ids] = dout\n")),
    "weak: half the steps": None,
}


def perplexity(module, seed: int, on_test: bool = False, **overrides) -> float:
    """Test perplexity after training on the training plays (or, a cheat, on the test plays themselves)."""
    train, test = hidden.shakespeare_ids()
    params, _ = module.train_ffnn(test if on_test else train, hidden.VOCAB_SIZE,
                                  **{**hidden.TRAIN_SETTINGS, "seed": seed, **overrides})
    return hidden.heldout_perplexity(ref, params, test, hidden.TRAIN_SETTINGS["context"])


def main():
    seed = hidden.TRAIN_SETTINGS["seed"]
    start = time.process_time()
    base = perplexity(ref, seed)
    took = time.process_time() - start
    print(f"reference, grader's seed {seed}: test perplexity {base:.2f} (threshold x{1 + hidden.PPL_MARGIN:.2f} = "
          f"{base * (1 + hidden.PPL_MARGIN):.2f}); one training + scoring run: {took:.1f} s CPU")
    seeds = [seed + 1 + i for i in range(4)]
    print(f"{'':40s}" + "".join(f"{s:>8d}" for s in seeds) + "     max")
    rows = {"reference, other seeds": (ref, {})}
    rows.update({name: (module or ref, {} if module else {"steps": hidden.TRAIN_SETTINGS["steps"] // 2})
                 for name, module in VARIANTS.items()})
    if "--cheat-only" in sys.argv:
        rows = {}
    for name, (module, overrides) in rows.items():
        ratios = [perplexity(module, s, **overrides) / base for s in seeds]
        print(f"{name:40s}" + "".join(f"{r:8.3f}" for r in ratios) + f"{max(ratios):8.3f}", flush=True)
    ratios = [perplexity(ref, s, on_test=True) / base for s in seeds]
    print(f"{'cheat: trained on the test plays':40s}" + "".join(f"{r:8.3f}" for r in ratios) + f"{max(ratios):8.3f}")
    print(f"(ratios to the reference at the grader's seed; pass when <= 1 + PPL_MARGIN = {1 + hidden.PPL_MARGIN:.2f} "
          f"and >= FLOOR_RATIO = {hidden.FLOOR_RATIO:.2f}, below which the model has seen the test plays)")


if __name__ == "__main__":
    main()
