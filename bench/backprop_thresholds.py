"""How much room the backprop Q6 perplexity threshold leaves, measured over several seeds.

The grader trains the student's `train_ffnn` with fixed settings and one seed and passes it when
its perplexity on the test plays is at most the reference's (same settings, same seed) plus
PPL_MARGIN. A correct student's code draws its random numbers differently from the reference, which
is like another seed, so this prints the reference over five seeds and correct variants that
use their randomness differently, and buggy or weaker ones that should fail, all as ratios to the
reference at the grader's seed. Each training run is single-threaded, as in the grader's worker.

The last row trains on the test plays themselves, which no honest run can: the grader flags a
perplexity below FLOOR_RATIO times the reference as having seen the test text.

Provenance (the trace is weighted by how much each entry can move the logits, ffnn_relevance): a
submission trains from the start the grader passes (the reference's init_params with a
secret seed; the rows below train from init_params(seed), the same draw), and its E, W and U must keep
START_LEAST (each) and START_MEAN (on average) of the correlation with that start which the
reference's run at the grader's seed keeps. A second table prints, per row and seed, the least and
the mean share kept; then weights trained from another seed (pasted), blends of them with the start
(one factor for all matrices, and the cheapest passing one of a search with a factor per matrix),
and the start moved by the pasted run's update, each with its perplexity.

Positions (--spread, seconds): train_minibatch_hidden trains on a stream of parts with words of their
own and needs every part learned (each part's gain in log P(its own words) at least SPREAD_SHARE of
the best part's); this prints the gains of correct samplers, of the issue-31 sampler (consecutive
slices from the start) and others that see part of the stream, and of broken updates (whose best gain
stays under SPREAD_LEARNED, so the spread is not judged).

Run: .venv/bin/python bench/backprop_thresholds.py   (about five minutes; --cheat-only: the last row;
--spread: the positions table only)
"""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy: as in the worker
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import itertools  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from reference_variants import modules  # noqa: E402 - bench/ is on sys.path when run as a script

from autograder.checking.provenance import start_shares  # noqa: E402

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


SHARES: dict = {}  # (row, seed) -> the shares of the start kept, filled by `perplexity`
PROFILE: dict = {}  # the reference run's start profile at the grader's seed, set by `main`


def start_of(module, seed: int) -> dict:
    s = hidden.TRAIN_SETTINGS
    return module.init_params(hidden.VOCAB_SIZE, s["dim"], s["hidden"], s["context"], seed)


def perplexity(module, seed: int, on_test: bool = False, row: str = "", **overrides) -> float:
    """Test perplexity after training on the training plays (or, a cheat, on the test plays themselves);
    the shares of its start the run kept go to SHARES[(row, seed)]."""
    train, test = hidden.shakespeare_ids()
    params, _ = module.train_ffnn(test if on_test else train, hidden.VOCAB_SIZE,
                                  **{**hidden.TRAIN_SETTINGS, "seed": seed, **overrides})
    if row:
        SHARES[(row, seed)] = start_shares(start_of(module, seed), params, PROFILE, weights=relevance(params))
    return hidden.heldout_perplexity(ref, params, test, hidden.TRAIN_SETTINGS["context"])


def relevance(params: dict) -> dict:
    """The grader's weights for the trace (hidden_checks.ffnn_relevance) on the training plays."""
    return hidden.ffnn_relevance(params, hidden.relevance_contexts(ref, hidden.shakespeare_ids()[0]))


def dead_slots(start: dict, home_steps: int, beta: float, seed: int = 999) -> tuple[dict, dict]:
    """A smaller model trained at home (28 of 64 hidden units, 10 of 32 embedding dimensions used), its
    unused slots filled with beta x the grader's start where that changes nothing it computes: W rows
    of 12 units with no U column, U columns of 24 units whose W row and bias are 0 (h = 0), E columns
    of 16 dimensions no W column reads, W columns of 6 dimensions whose E column is 0. Returns (the
    home model alone, the model with the start planted)."""
    import numpy as np
    s, V = hidden.TRAIN_SETTINGS, hidden.VOCAB_SIZE
    d, H, k = s["dim"], s["hidden"], s["context"]
    dead_h, no_u = np.arange(24), np.arange(24, 36)
    unread, zero = np.arange(16), np.arange(16, 22)

    def cols(dims):
        return np.concatenate([dims + j * d for j in range(k)])

    def mask(p):
        p["W"][dead_h], p["b"][dead_h], p["U"][:, dead_h], p["U"][:, no_u], p["W"][no_u] = 0, 0, 0, 0, 0
        p["W"][:, cols(unread)], p["W"][:, cols(zero)], p["E"][:, unread], p["E"][:, zero] = 0, 0, 0, 0
        return p

    train = hidden.shakespeare_ids()[0]
    rng = np.random.default_rng(seed + 1)
    params = mask(ref.init_params(V, d, H, k, seed))
    contexts, targets = ref.context_windows(train, k)
    for _ in range(home_steps):
        batch = rng.integers(0, len(targets), size=s["batch_size"])
        _, grads = ref.ffnn_loss_and_grads(params, contexts[batch], targets[batch])
        for n in params:
            params[n] -= s["lr"] * grads[n]
        mask(params)
    planted = {n: v.copy() for n, v in params.items()}
    planted["U"][:, dead_h] = beta * start["U"][:, dead_h]
    planted["W"][no_u] = beta * start["W"][no_u]
    live = np.setdiff1d(np.arange(H), dead_h)
    planted["W"][np.ix_(live, cols(zero))] = beta * start["W"][np.ix_(live, cols(zero))]
    planted["E"][:, unread] = beta * start["E"][:, unread]
    return params, planted


def provenance_table(seeds: list[int], base: float) -> None:
    print(f"\nshare of the start kept (least / mean over E, W, U); pass: each >= {hidden.START_LEAST}, "
          f"mean >= {hidden.START_MEAN}")
    for row in dict.fromkeys(r for r, _ in SHARES):
        cells = [SHARES[(row, s)] for s in seeds if (row, s) in SHARES]
        print(f"{row:40s}" + "".join(f"  {min(c.values()):.2f}/{sum(c.values()) / len(c):.2f}" for c in cells))
    train, test = hidden.shakespeare_ids()
    start = start_of(ref, seeds[0])  # the grader's start for this submission; the pasted run had another
    pasted, _ = ref.train_ffnn(train, hidden.VOCAB_SIZE, **{**hidden.TRAIN_SETTINGS, "seed": seeds[1]})
    own_start = start_of(ref, seeds[1])

    def row(label: str, weights: dict) -> tuple[bool, float]:
        kept = start_shares(start, weights, PROFILE, weights=relevance(weights))
        least, mean = min(kept.values()), sum(kept.values()) / len(kept)
        ppl = hidden.heldout_perplexity(ref, weights, test, hidden.TRAIN_SETTINGS["context"]) / base
        if label:
            print(f"{label:40s}  {least:.2f}/{mean:.2f}   perplexity ratio {ppl:.3f}")
        return least >= hidden.START_LEAST and mean >= hidden.START_MEAN, ppl

    for beta in (0.0, 1.0, 2.0, 4.0):  # pasted weights plus beta times the start
        row(f"pasted + {beta:g} x the start", {k: pasted[k] + beta * start[k] for k in pasted})
    row("start + the pasted run's update", {k: start[k] + pasted[k] - own_start[k] for k in pasted})
    cheapest = None  # the blend that passes the start's test at the lowest perplexity, one beta per matrix
    for betas in itertools.product((1.0, 1.5, 2.0, 2.5), repeat=3):
        beta = dict(zip(("E", "W", "U"), betas), b=0.0, b2=0.0)
        passes, ppl = row("", {k: pasted[k] + beta[k] * start[k] for k in pasted})
        if passes and (cheapest is None or ppl < cheapest[0]):
            cheapest = (ppl, betas)
    print(f"cheapest blend that passes the start's test: betas (E, W, U) = {cheapest[1]}, perplexity ratio "
          f"{cheapest[0]:.3f}" if cheapest else "no blend passes the start's test")
    if cheapest:  # the same blend from a better model: trained at home for twice the steps
        better, _ = ref.train_ffnn(train, hidden.VOCAB_SIZE, **{**hidden.TRAIN_SETTINGS, "seed": seeds[1],
                                                                  "steps": 2 * hidden.TRAIN_SETTINGS["steps"]})
        alone = row("", better)[1]
        beta = dict(zip(("E", "W", "U"), cheapest[1]), b=0.0, b2=0.0)
        row(f"twice the steps ({alone:.3f}) + that blend", {k: better[k] + beta[k] * start[k] for k in better})
    for steps in (4000, 8000):  # unused units and dimensions filled with the start: nothing the model computes changes
        home, _ = dead_slots(start, steps, 1.0)
        alone = row("", home)[1]
        for beta in (10.0, 30.0):
            row(f"dead slots, {steps} steps ({alone:.3f}) + {beta:g} x start", dead_slots(start, steps, beta)[1])


SPREAD_VARIANTS = {
    "correct: reference (integers, with replacement)": lambda: ref,
    "correct: epochs of shuffled positions": lambda: VARIANTS["correct: epochs of shuffled positions"],
    "correct: blocks at random offsets": lambda: variant((SAMPLING, "        first = rng.integers(0, len(targets) - "
                                                          "batch_size + 1)\n        batch = np.arange(first, first + "
                                                          "batch_size)\n")),
    "bug: consecutive slices from the start": lambda: variant((SAMPLING, "        batch = np.arange(_ * batch_size, "
                                                               "(_ + 1) * batch_size) % len(targets)\n")),
    "bug: the first half of the stream": lambda: variant((SAMPLING, "        batch = rng.integers(0, len(targets) // 2, "
                                                          "size=batch_size)\n")),
    "bug: the first 90% of the stream": lambda: variant((SAMPLING, "        batch = rng.integers(0, len(targets) * 9 "
                                                         "// 10, size=batch_size)\n")),
    "broken update: a step along the gradient": lambda: variant(("params[name] -= lr * grads[name]",
                                                                 "params[name] += lr * grads[name]")),
    "broken update: divided by the batch size": lambda: variant(("params[name] -= lr * grads[name]",
                                                                 "params[name] -= lr * grads[name] / batch_size")),
}


def spread_table(seeds=range(5)) -> None:
    """Each part's gain over `seeds`, and the share of the best part's gain the worst part reaches."""
    import numpy as np
    s, n = hidden.SPREAD_SETTINGS, hidden.SPREAD_LENGTH
    print(f"positions: every part must gain >= {hidden.SPREAD_SHARE} of the best part's gain, judged when the best "
          f"gains >= {hidden.SPREAD_LEARNED}; cells: worst/best (best)")
    for name, make in SPREAD_VARIANTS.items():
        module, cells = make(), []
        for seed in seeds:
            rng = np.random.default_rng(seed)
            part = np.repeat(np.arange(hidden.SPREAD_PARTS), n // hidden.SPREAD_PARTS)
            ids = 2 + hidden.SPREAD_WORDS * part + rng.integers(0, hidden.SPREAD_WORDS, size=n)
            V = 2 + hidden.SPREAD_PARTS * hidden.SPREAD_WORDS
            start = ref.init_params(V, s["dim"], s["hidden"], s["context"], 100 + seed)
            params, _ = module.train_ffnn(ids, V, **{**s, "seed": seed}, start=start)
            gains = hidden.part_gains(ref, start, params, ids, part, s["context"])
            cells.append(f"{gains.min() / gains.max():6.2f} ({gains.max():5.2f})")
        print(f"{name:45s}" + "  ".join(cells), flush=True)


def main():
    global PROFILE
    if "--spread" in sys.argv:
        spread_table()
        return
    seed = hidden.TRAIN_SETTINGS["seed"]
    start = time.process_time()
    run = hidden.train_and_score(ref)
    base, PROFILE = run["perplexity"], run["start"]
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
        ratios = [perplexity(module, s, row=name, **overrides) / base for s in seeds]
        print(f"{name:40s}" + "".join(f"{r:8.3f}" for r in ratios) + f"{max(ratios):8.3f}", flush=True)
    ratios = [perplexity(ref, s, on_test=True) / base for s in seeds]
    print(f"{'cheat: trained on the test plays':40s}" + "".join(f"{r:8.3f}" for r in ratios) + f"{max(ratios):8.3f}")
    print(f"(ratios to the reference at the grader's seed; pass when <= 1 + PPL_MARGIN = {1 + hidden.PPL_MARGIN:.2f} "
          f"and >= FLOOR_RATIO = {hidden.FLOOR_RATIO:.2f}, below which the model has seen the test plays)")
    provenance_table(seeds, base)


if __name__ == "__main__":
    main()
