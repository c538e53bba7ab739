"""Plain helper objects that checks create inside the student's process. Nothing here is secret.

Why: to grade one function on its own, a check hands it inputs that are known to be right, even
when those inputs are objects. `sentence_logprob(lm, tokens)` is checked with a `TableLM` whose
probabilities are a plain table, so a bug in the student's own model class costs only its own
question. Students may read this file; it solves nothing they are asked to write.
"""
from __future__ import annotations

import math


class TableLM:
    """A language model given by a table: context tuple (length n-1) -> {word: probability}.

    Contexts missing from the table get the uniform distribution over `vocab`. Shorter contexts are
    left-padded with "<s>", longer ones cut to their last n-1 tokens, as the n-gram assignment does.
    """

    def __init__(self, n: int, vocab, table: dict):
        self.n = int(n)
        self.vocab = set(vocab)
        self.table = {tuple(k): dict(v) for k, v in table.items()}

    def prob(self, word, context) -> float:
        context = tuple(context)
        if self.n == 1:
            context = ()
        else:
            context = (("<s>",) * (self.n - 1) + context)[-(self.n - 1):]
        dist = self.table.get(context)
        if dist is None:
            return 1.0 / len(self.vocab)
        return float(dist.get(word, 0.0))

    def logprob(self, word, context) -> float:
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf


def random_sentences(seed: int, n_sentences: int, length: int, vocab_size: int) -> list[list[str]]:
    """Made where it is used: big inputs (a million tokens) need not cross the process boundary."""
    import random
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab_size)]
    return [rng.choices(words, k=length) for _ in range(n_sentences)]


FACTORIES = {"TableLM": TableLM, "random_sentences": random_sentences}
