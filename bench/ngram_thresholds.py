"""How much room the Q6 perplexity thresholds and flags leave, measured over sampling plans and languages.

Q6 scores a model from its whole next-word distributions at sampled held-out positions (every first
position, plus one later position in each of a growing number of sentences: `autograder/checking/perplexity.py`),
always paired with the staff model on the same positions. The check passes a model whose perplexity is
within 10% of the staff model's; it flags, with no points, one below `BELOW_REFERENCE` times the staff
model's, or whose lead over the staff model on held-out text is below `BELOW_VALIDATION` times its lead
on validation (each by Z standard errors), or, on synthetic text, more than 2% below the Bayes-optimal
floor. On Shakespeare it asks for more positions (`ROUNDS`) while the estimate is within Z standard
errors of a line.

This runs the check's own decision (`hidden_checks.judge`) for correct models a student might submit and
for models that did see the held-out text, over many plans (the plan is secret and differs per
submission), and prints the share of plans where each model passes, fails or is flagged, the spread of
the sampled ratio where the check decided, and how many positions it needed. Correct models must pass or
fail by their whole-text ratio, never by the plan; cheating models must be flagged under every plan.

Run: .venv/bin/python bench/ngram_thresholds.py [--plans 100] [--languages 3]   (about ten minutes)
"""
import argparse
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autograder.authoring import assignments  # noqa: E402

NGRAM = assignments.get("ngram")
ref = NGRAM.reference()
hidden = assignments.load_module(NGRAM.dir / "hidden_checks.py", "lmgrade_checks_ngram_hidden")

from autograder.checking.perplexity import plan_perplexity, plan_positions  # noqa: E402


def token_logprobs(model, sentences) -> np.ndarray:
    """Per-sentence arrays of log P(token | context) for every position, end marker included."""
    return [np.array([model.logprob(w, c) for w, c in hidden.contexts_for(s, model.n)]) for s in sentences]


def honest(train, validation):
    vocab = ref.build_vocab(train, 1)
    models = [ref.NGramLM(n, vocab, 0.01).fit(train) for n in (1, 2, 3)]
    kn = ref.KneserNeyLM(vocab, 0.75).fit(train)
    tri = ref.NGramLM(3, vocab, 0.001).fit(train)
    lambdas = ref.tune_lambdas([kn, tri], validation[::10], [[a / 10, 1 - a / 10] for a in range(1, 10)])
    return {
        "interpolated, k=0.01, weights .1/.3/.6": ref.InterpolatedLM(models, [0.1, 0.3, 0.6]),
        "interpolated, k=0.01, weights .2/.4/.4": ref.InterpolatedLM(models, [0.2, 0.4, 0.4]),
        "bigram add-0.01 alone": models[1],
        "Kneser-Ney bigram + add-0.001 trigram": ref.InterpolatedLM([kn, tri], lambdas),
    }


def cheating(train, validation, heldout):
    """The reference recipe given (part of) the held-out text as training data."""
    half = heldout[::2]
    return {
        "reference trained on train + held-out": ref.build_model(train + heldout, validation),
        "reference trained on train + half the held-out": ref.build_model(train + half, validation),
        "reference trained on train + validation (allowed)": ref.build_model(train + validation, validation),
    }


def full(sentences_logps) -> float:
    flat = np.concatenate(sentences_logps)
    return math.exp(-flat.mean())


class Notes:
    def note(self, text):
        pass


def decide(plans, test_lp, ref_test, val_lp, ref_val, rounds, floor_lp=None):
    """The check's own decision (hidden.judge) round by round: (outcome, later positions used, ratio)."""
    plan_t, plan_v = plans
    for m in rounds:
        pt, pv = plan_t.prefix(m), plan_v.prefix(None if m is None else m // 2)
        pick = lambda lp, plan: [lp[s][i] for s, i in plan.positions]  # noqa: E731
        ratio = plan_perplexity(pt, pick(test_lp, pt)) / plan_perplexity(pt, pick(ref_test, pt))
        try:
            done = hidden.judge(Notes(), "model", pt, pick(test_lp, pt), pick(ref_test, pt), pv, pick(val_lp, pv),
                                pick(ref_val, pv), last=m == rounds[-1],
                                floor_logprobs=None if floor_lp is None else pick(floor_lp, pt))
        except hidden.CheckFailed as failure:
            text = str(failure)
            return ("flagged" if "No points" in text else "fails"), len(pt.used), ratio
        if done:
            return "passes", len(pt.used), ratio
    raise AssertionError("the last round always decides")


def report(name, test_lp, val_lp, ref_test, ref_val, plans, rounds, base_full, floor_lp=None):
    outcomes = [decide(p, test_lp, ref_test, val_lp, ref_val, rounds, floor_lp) for p in plans]
    ratios = np.array([r for _, _, r in outcomes])
    counts = {k: sum(o == k for o, _, _ in outcomes) / len(outcomes) for k in ("passes", "fails", "flagged")}
    used = np.mean([u for _, u, _ in outcomes])
    lead_val = (full(val_lp) / full(ref_val))
    print(f"  {name:50s} {full(test_lp) / base_full:6.3f} {lead_val:6.3f}  {ratios.min():6.3f} {ratios.max():6.3f}"
          f"  {counts['passes']:6.1%} {counts['fails']:6.1%} {counts['flagged']:7.1%}  {used:6.0f}")


HEADER = (f"  {'model':50s} {'ratio':>6s} {'val':>6s}  {'min':>6s} {'max':>6s}  {'passes':>6s} {'fails':>6s} "
          f"{'flagged':>7s}  {'later':>6s}\n"
          "  (ratio and val: perplexity / the reference's on the whole held-out and validation texts; min, max:\n"
          "   the sampled ratio where the check decided; then the share of plans where the check passes, fails\n"
          "   or flags the model, and the mean number of later positions it scored)")


def shakespeare(n_plans: int):
    train, validation, test = hidden.shakespeare_splits(ref)
    reference = ref.build_model(train, validation)
    ref_test, ref_val = token_logprobs(reference, test), token_logprobs(reference, validation)
    base = full(ref_test)
    print(f"\nShakespeare: reference perplexity {base:.2f} on the test plays, {full(ref_val):.2f} on validation; "
          f"rounds of {hidden.ROUNDS} later positions (validation: half)")
    rng = np.random.default_rng(0)
    plans = [(plan_positions(test, hidden.ROUNDS[-1], rng), plan_positions(validation, hidden.ROUNDS[-1] // 2, rng))
             for _ in range(n_plans)]
    print(HEADER)
    report("reference build_model", ref_test, ref_val, ref_test, ref_val, plans, hidden.ROUNDS, base)
    for group in (honest(train, validation), cheating(train, validation, test)):
        for name, model in group.items():
            report(name, token_logprobs(model, test), token_logprobs(model, validation), ref_test, ref_val,
                   plans, hidden.ROUNDS, base)


def synthetic(n_languages: int, n_plans: int):
    print(f"\nSynthetic languages ({n_languages} seeds; {hidden.SYNTHETIC_HELDOUT} held-out sentences, "
          "one later position each); floor: Bayes-optimal perplexity / the reference's")
    for seed in range(n_languages):
        language, train, validation, heldout = hidden.synthetic_texts(seed)
        reference = ref.build_model(train, validation)
        ref_test, ref_val = token_logprobs(reference, heldout), token_logprobs(reference, validation)
        true_test = [language.token_logprobs(s) for s in heldout]
        rng = np.random.default_rng(seed)
        plans = [(plan_positions(heldout, None, rng), plan_positions(validation, None, rng)) for _ in range(n_plans)]
        base = full(ref_test)
        print(f" language {seed}: reference {base:.3f}, floor {full(true_test) / base:.3f}")
        print(HEADER)
        report("reference build_model", ref_test, ref_val, ref_test, ref_val, plans, (None,), base, true_test)
        for group in (honest(train, validation), cheating(train, validation, heldout)):
            for name, model in group.items():
                report(name, token_logprobs(model, heldout), token_logprobs(model, validation), ref_test, ref_val,
                       plans, (None,), base, true_test)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plans", type=int, default=200)
    parser.add_argument("--languages", type=int, default=4)
    parser.add_argument("--skip-shakespeare", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args()
    print(f"flags: below {hidden.BELOW_REFERENCE} x the reference, a lead over it below {hidden.BELOW_VALIDATION} x "
          f"the lead on validation; threshold {1 + hidden.PPL_MARGIN:.2f} x the reference; Z = {hidden.Z}")
    if not args.skip_synthetic:
        synthetic(args.languages, args.plans)
    if not args.skip_shakespeare:
        shakespeare(args.plans)


if __name__ == "__main__":
    main()
