"""Fit and score the reference n-gram models and nltk.lm on the same data; check they agree.

Data: Shakespeare verse lines. Train is tokenized with the reference `tokenize`, the vocabulary
is `build_vocab(train, 2)`, and out-of-vocabulary tokens become "<unk>" (`replace_oov`) in train
and validation. Every model is fitted on all of train and scored on the first VALID_LINES lines
of validation (the same subset for both libraries: nltk scores a token ~10x slower).

Making nltk compute the same thing:
  * Padding. nltk's `pad_both_ends` adds n-1 "<s>" AND n-1 "</s>"; ours adds n-1 "<s>" and one
    "</s>". We hand nltk the n-grams of our own `pad(sentence, n)`, so both count the same ones.
  * Vocabulary. Lidstone's denominator is c(ctx) + gamma * len(vocab). nltk's `Vocabulary`
    counts every word seen at least `unk_cutoff` times PLUS its unk_label, which it always
    adds. Ours already holds "<unk>" (and "</s>", never "<s>"), so nltk gets our words minus
    "<unk>", cutoff 1, with unk_label="<unk>": then len(nltk vocab) == len(ours) (asserted).
  * Masking. nltk's `fit` and `score` map every token outside the vocabulary to unk_label,
    context tokens included. "<s>" is in neither vocabulary, so nltk would fold the
    sentence-start context ("<s>",) into ("<unk>",) and count other n-grams than we do. Our
    text is already masked by `replace_oov`, so we skip that second masking: we count with
    `lm.counts.update` (what `fit` does after its lookup) and score with `lm.unmasked_score`
    (what `score` calls after its lookup).
  * Perplexity. nltk's own `perplexity(ngrams)` is 2 ** (mean of -log2 score) over the n-grams
    given, so over our padded n-grams it already counts each sentence's words plus one "</s>"
    and never predicts "<s>", like our `perplexity`. We compute that same formula from
    `unmasked_score` (nltk's `logscore` would mask again).

Exits with status 1 if any pair of perplexities differs by more than 1e-6 relative.
It then prints controls: nltk run with one of its own conventions left in place (its masking,
its padding, its extra "<UNK>"), each of which should move the perplexity by more than 1e-6,
so the agreement above is not a given. The first control also times nltk's usual API
(`fit`, `perplexity`), which is slower than the counts/unmasked_score route.

Run: .venv/bin/python bench/ngram_vs_nltk.py [--valid-lines N]   (default 5000; 0 = all)
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nltk.lm import MLE, Lidstone, Vocabulary  # noqa: E402
from nltk.lm.preprocessing import pad_both_ends  # noqa: E402
from nltk.lm.util import log_base2  # noqa: E402
from nltk.util import ngrams as nltk_ngrams  # noqa: E402

from autograder.authoring import assignments  # noqa: E402
from autograder.data import shakespeare  # noqa: E402

VALID_LINES = 5_000
REPEATS = 3  # timings are the best of this many runs (the machine may be shared)
RTOL = 1e-6
# (label, order, k): k == 0 is maximum likelihood (nltk MLE), k > 0 is add-k (nltk Lidstone, gamma=k)
MODELS = [
    ("unigram MLE", 1, 0.0),
    ("bigram add-1", 2, 1.0),
    ("bigram add-0.01", 2, 0.01),
    ("trigram add-0.01", 3, 0.01),
]


def load_reference():
    return assignments.get("ngram").reference()


def prepare(ref, valid_lines: int):
    train = [ref.tokenize(line) for line in shakespeare.lines("train")]
    valid_raw = shakespeare.lines("validation")
    valid = [ref.tokenize(line) for line in (valid_raw[:valid_lines] if valid_lines else valid_raw)]
    vocab = ref.build_vocab(train, 2)
    return [ref.replace_oov(s, vocab) for s in train], [ref.replace_oov(s, vocab) for s in valid], vocab


def ours(ref, n, k, vocab, train, valid) -> tuple[float, float]:
    start = time.perf_counter()
    lm = ref.NGramLM(n, vocab, k).fit(train)
    ppl = ref.perplexity(lm, valid)
    return ppl, time.perf_counter() - start


def nltk_vocabulary(vocab: set[str]) -> Vocabulary:
    # nltk always adds its unk_label to the vocabulary; ours already contains "<unk>".
    return Vocabulary(sorted(vocab - {"<unk>"}), unk_cutoff=1, unk_label="<unk>")


def nltk_model(n, k, nvocab):
    return MLE(n, vocabulary=nvocab) if k == 0 else Lidstone(k, n, vocabulary=nvocab)


def unmasked_perplexity(lm, sentences_of_ngrams) -> float:
    """nltk's perplexity formula, 2 ** -(mean log2 score), without its second OOV masking."""
    total_log2 = 0.0
    count = 0
    for grams in sentences_of_ngrams:
        for gram in grams:
            total_log2 += log_base2(lm.unmasked_score(gram[-1], gram[:-1] or None))
            count += 1
    return math.pow(2.0, -total_log2 / count)


def theirs(ref, n, k, vocab, train, valid) -> tuple[float, float]:
    start = time.perf_counter()
    lm = nltk_model(n, k, nltk_vocabulary(vocab))
    lm.counts.update(nltk_ngrams(ref.pad(s, n), n) for s in train)
    ppl = unmasked_perplexity(lm, (nltk_ngrams(ref.pad(s, n), n) for s in valid))
    elapsed = time.perf_counter() - start
    assert len(lm.vocab) == len(vocab), (len(lm.vocab), len(vocab))
    return ppl, elapsed


def controls(ref, vocab, train, valid, our_ppl: dict) -> None:
    """Each control leaves one nltk convention in place; each should change the perplexity."""
    print("\ncontrols: nltk with one of its own conventions left in (each should NOT agree; one run each)")
    header = f"{'control':<62} {'nltk ppl':>12} {'rel diff':>9} {'nltk s':>7}"
    print(header)
    print("-" * len(header))

    def row(label, key, ppl, seconds):
        rel = abs(ppl - our_ppl[key]) / our_ppl[key]
        verdict = "differs" if rel > RTOL else "AGREES (control is not sensitive)"
        print(f"{label:<62} {ppl:12.6f} {rel:9.1e} {seconds:7.2f}  {verdict}", flush=True)

    # 1. nltk's usual API: fit() and perplexity() mask "<s>" (outside the vocabulary) to "<unk>".
    start = time.perf_counter()
    lm = nltk_model(2, 0.01, nltk_vocabulary(vocab))
    lm.fit([list(nltk_ngrams(ref.pad(s, 2), 2)) for s in train])
    ppl = lm.perplexity([g for s in valid for g in nltk_ngrams(ref.pad(s, 2), 2)])
    row("bigram add-0.01, nltk fit()+perplexity(): <s> masked to <unk>", "bigram add-0.01", ppl,
        time.perf_counter() - start)

    # 2. nltk's padding: n-1 "</s>" at the end (for a trigram, one more "</s>" counted and predicted).
    start = time.perf_counter()
    lm = nltk_model(3, 0.01, nltk_vocabulary(vocab))
    lm.counts.update(nltk_ngrams(list(pad_both_ends(s, 3)), 3)
                     for s in train)
    ppl = unmasked_perplexity(lm, (nltk_ngrams(list(pad_both_ends(s, 3)), 3) for s in valid))
    row("trigram add-0.01, nltk pad_both_ends (two </s>)", "trigram add-0.01", ppl, time.perf_counter() - start)

    # 3. nltk's vocabulary: all our words, default unk_label "<UNK>" on top -> len(vocab) one larger.
    start = time.perf_counter()
    nvocab = Vocabulary(sorted(vocab), unk_cutoff=1)
    lm = nltk_model(2, 1.0, nvocab)
    lm.counts.update(nltk_ngrams(ref.pad(s, 2), 2) for s in train)
    ppl = unmasked_perplexity(lm, (nltk_ngrams(ref.pad(s, 2), 2) for s in valid))
    row(f"bigram add-1, Vocabulary(our words) + '<UNK>' (len {len(nvocab):,})", "bigram add-1", ppl,
        time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=REPEATS,
                        help=f"time each fit+score this many times and report the fastest (default {REPEATS})")
    parser.add_argument("--valid-lines", type=int, default=VALID_LINES,
                        help=f"score the first N validation lines (default {VALID_LINES}; 0 = all)")
    args = parser.parse_args()
    ref = load_reference()
    t0 = time.perf_counter()
    train, valid, vocab = prepare(ref, args.valid_lines)
    n_train = sum(len(s) + 1 for s in train)
    n_valid = sum(len(s) + 1 for s in valid)
    print(f"data: {len(train):,} train lines ({n_train:,} tokens incl. </s>), "
          f"first {len(valid):,} validation lines ({n_valid:,} predicted tokens), "
          f"|V| = {len(vocab):,} (min_count 2; prepared in {time.perf_counter() - t0:.1f} s)")
    print(f"nltk vocabulary: {len(nltk_vocabulary(vocab)):,} entries (our words minus '<unk>', "
          "plus its unk_label '<unk>')\n")

    header = (f"{'model':<18} {'our ppl':>12} {'nltk ppl':>12} {'rel diff':>9} "
              f"{'our s':>7} {'nltk s':>7} {'nltk/ours':>9}")
    print(header)
    print("-" * len(header))
    failures = []
    our_ppls = {}
    for label, n, k in MODELS:
        our_runs = [ours(ref, n, k, vocab, train, valid) for _ in range(args.repeat)]
        nltk_runs = [theirs(ref, n, k, vocab, train, valid) for _ in range(args.repeat)]
        assert len({ppl for ppl, _ in our_runs}) == 1 and len({ppl for ppl, _ in nltk_runs}) == 1
        our_ppl, our_s = our_runs[0][0], min(t for _, t in our_runs)
        nltk_ppl, nltk_s = nltk_runs[0][0], min(t for _, t in nltk_runs)
        our_ppls[label] = our_ppl
        rel = abs(our_ppl - nltk_ppl) / abs(our_ppl)
        ok = math.isfinite(our_ppl) and rel <= RTOL
        if not ok:
            failures.append(label)
        print(f"{label:<18} {our_ppl:12.6f} {nltk_ppl:12.6f} {rel:9.1e} "
              f"{our_s:7.2f} {nltk_s:7.2f} {nltk_s / our_s:8.1f}x" + ("" if ok else "  MISMATCH"),
              flush=True)
    print(f"(times: fit on all of train + score on the validation subset, seconds, best of {args.repeat})")
    controls(ref, vocab, train, valid, our_ppls)
    print(f"\ntotal run {time.perf_counter() - t0:.0f} s")
    if failures:
        print(f"FAILED: perplexities differ by more than {RTOL:g} relative for: {', '.join(failures)}")
        return 1
    print(f"OK: all perplexities agree within {RTOL:g} relative")
    return 0


if __name__ == "__main__":
    sys.exit(main())
