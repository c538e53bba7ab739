"""Backs the Q2 time limit: counting 1M tokens must finish within 30 s in the grader.

Times the reference `count_ngrams`, a plain-loop student version (correct, slower), and nltk's
NgramCounter as the peer, on the same 1M tokens the check uses, and prints each as a ratio to the
reference and as a fraction of the limit.

Run: .venv/bin/python bench/count_speed.py
"""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from autograder.authoring import assignments  # noqa: E402
from autograder.sandbox.support import random_sentences  # noqa: E402

LIMIT_S = 30.0
ref = assignments.get("ngram").reference()


def loop_count(sentences, n):
    counts = {}
    for sentence in sentences:
        padded = ref.pad(sentence, n)
        for i in range(len(padded) - n + 1):
            gram = tuple(padded[i:i + n])
            counts[gram] = counts.get(gram, 0) + 1
    return counts


def nltk_count(sentences, n):
    from nltk.lm import NgramCounter
    return NgramCounter([list(zip(*(ref.pad(s, n)[i:] for i in range(n)))) for s in sentences])


def best_of(fn, *args, repeat=3):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    sentences = random_sentences(0, 50_000, 20, 30)  # the check's shape: 1M tokens, 30 word types
    base = best_of(ref.count_ngrams, sentences, 3)
    assert loop_count(sentences, 3) == ref.count_ngrams(sentences, 3)
    print(f"{'implementation':32s} {'seconds':>8s} {'x reference':>12s} {'of limit':>9s}")
    for name, fn in [("reference (Counter over zip)", ref.count_ngrams), ("plain loop with dict.get", loop_count),
                     ("nltk.lm.NgramCounter (peer)", nltk_count)]:
        seconds = base if fn is ref.count_ngrams else best_of(fn, sentences, 3)
        print(f"{name:32s} {seconds:8.2f} {seconds / base:12.1f} {seconds / LIMIT_S:9.1%}")


if __name__ == "__main__":
    main()
