"""How much room the Q6 perplexity thresholds leave, measured over several held-out seeds.

The threshold is the reference's perplexity plus 10%. The synthetic held-out sample is drawn with
a seed taken from each submission's code, so this prints, for five such seeds and for the
Shakespeare test plays, the Bayes-optimal floor, the reference, and simpler but correct models a
student might submit, as ratios to the reference. A correct model within 10% passes; the floor is
reported so that the 2% slack below it can be judged too.

Run: .venv/bin/python bench/ngram_thresholds.py   (about two minutes)
"""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
spec = importlib.util.spec_from_file_location("ref", ROOT / "solutions" / "ngram.py")
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
spec = importlib.util.spec_from_file_location("hidden", ROOT / "assignments" / "ngram" / "hidden_checks.py")
hidden = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hidden)

from autograder.data.synthetic import HiddenMarkovLanguage  # noqa: E402


def alternatives(train, validation):
    vocab = ref.build_vocab(train, 1)
    models = [ref.NGramLM(n, vocab, 0.01).fit(train) for n in (1, 2, 3)]
    return {
        "reference build_model": ref.build_model(train, validation),
        "interpolated, fixed k=0.01, weights .1/.3/.6": ref.InterpolatedLM(models, [0.1, 0.3, 0.6]),
        "interpolated, fixed k=0.01, weights .2/.4/.4": ref.InterpolatedLM(models, [0.2, 0.4, 0.4]),
        "bigram add-0.01 alone": models[1],
    }


def ppl(model, sentences):
    return hidden.model_perplexity(None, model, sentences)[0]


def main():
    language = HiddenMarkovLanguage.random(seed=1234)
    train, validation = language.sample(20_000, seed=1), language.sample(2_000, seed=2)
    models = alternatives(train, validation)
    print("synthetic language (threshold = reference x 1.10, floor slack 2%)")
    print(f"{'seed':>6} {'floor':>8} " + " ".join(f"{name[:22]:>23}" for name in models))
    for seed in range(5):
        heldout = language.sample(3_000, seed=1000 + seed)
        base = ppl(models["reference build_model"], heldout)
        print(f"{seed:>6} {language.perplexity(heldout) / base:8.3f} "
              + " ".join(f"{ppl(m, heldout) / base:23.3f}" for m in models.values()))
    print("(columns are ratios to the reference's perplexity on the same sample)")
    train, validation, test = hidden.shakespeare_splits(ref)
    models = alternatives(train, validation)
    base = ppl(models["reference build_model"], test)
    print(f"\nShakespeare test plays: reference perplexity {base:.2f}")
    for name, model in models.items():
        print(f"  {name:46s} {ppl(model, test) / base:6.3f}")


if __name__ == "__main__":
    main()
