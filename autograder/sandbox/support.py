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

    Contexts missing from the table get the uniform distribution over `vocab`. Longer contexts are
    cut to their last n-1 tokens. Shorter ones are left-padded with "<s>", as the n-gram assignment
    does, unless pad=False: that model, like any model the spec allows, answers differently for a
    context its caller forgot to pad, so a caller's missing "<s>" shows in the numbers.
    """

    def __init__(self, n: int, vocab, table: dict, pad: bool = True):
        self.n = int(n)
        self.vocab = set(vocab)
        self.table = {tuple(k): dict(v) for k, v in table.items()}
        self.pad = bool(pad)

    def prob(self, word, context) -> float:
        context = tuple(context)
        if self.n == 1:
            context = ()
        else:
            context = ((("<s>",) * (self.n - 1) if self.pad else ()) + context)[-(self.n - 1):]
        dist = self.table.get(context)
        if dist is None:
            return 1.0 / len(self.vocab)
        return float(dist.get(word, 0.0))

    def logprob(self, word, context) -> float:
        p = self.prob(word, context)
        return math.log(p) if p > 0 else -math.inf


class NextWordProbe:
    """Asks a language model for its whole next-word distribution, context by context.

    Why: the grader scores a model from the probability it gives to every word of `words` after a
    context, checks on its own side that they sum to 1, and reads the held-out word's probability
    itself; held-out words are never sent. This loop only saves a round trip per word.
    """

    def __init__(self, lm, words):
        self.lm = lm
        self.words = [str(w) for w in words]

    def distributions(self, contexts):
        """(len(contexts), len(words)) float64: row r is prob(w, contexts[r]) for every w of words."""
        import numpy as np
        out = np.empty((len(contexts), len(self.words)))
        for row, context in enumerate(contexts):
            context = tuple(context)
            out[row] = [float(self.lm.prob(w, context)) for w in self.words]
        return out


def random_sentences(seed: int, n_sentences: int, length: int, vocab_size: int) -> list[list[str]]:
    """Made where it is used: big inputs (a million tokens) need not cross the process boundary."""
    import random
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab_size)]
    return [rng.choices(words, k=length) for _ in range(n_sentences)]


class SmoothFunction:
    """f(x) = sum(sin(A x + c)) + x.x / 2 for an array x of a fixed shape, with its exact gradient.

    Why: a gradient checker is graded on a function whose gradient the grader knows exactly and
    whose curvature is large enough that a one-sided difference or a coarse step shows. This object
    stays in the grader: the student's code gets `smooth_function` (the value only), and is compared
    with the grader's own central differences at the same step, never with `grad`.
    """

    def __init__(self, seed: int, shape):
        import numpy as np
        self.shape = tuple(int(s) for s in shape)
        n = int(np.prod(self.shape))
        rng = np.random.default_rng(int(seed))
        self.A = rng.normal(size=(n + 2, n)) * 1.5 / math.sqrt(n)  # (m, n)
        self.c = rng.uniform(-1.0, 1.0, size=n + 2)  # (m,)

    def __call__(self, x) -> float:
        return _smooth_value(self.A, self.c, x)

    def grad(self, x):
        import numpy as np
        flat = np.asarray(x, dtype=np.float64).reshape(-1)
        return (self.A.T @ np.cos(self.A @ flat + self.c) + flat).reshape(self.shape)


def _smooth_value(A, c, x) -> float:
    import numpy as np
    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    return float(np.sin(A @ flat + c).sum() + 0.5 * flat @ flat)


def smooth_function(seed: int, shape):
    """SmoothFunction's value as a bare function: what a student's gradient checker is handed.

    Why bare: an object with `.grad` would hand the answer to the code under test. Its numbers
    can still be dug out of the closure, so the grader never compares with the exact gradient:
    it compares with its own central differences at the step the student was asked to use.
    """
    source = SmoothFunction(seed, shape)
    A, c = source.A, source.c

    def f(x):
        return _smooth_value(A, c, x)

    return f


# The backprop assignment's word-level Shakespeare: the grader and the notebook's experiments
# encode text the same way. A stream of word ids, one "</s>" after every verse line.
WORD_PATTERN = r"[a-z]+(?:'[a-z]+)*|[^\sa-z]"  # the ngram assignment's tokenizer


def word_vocab(lines, size: int) -> list[str]:
    """["</s>", "<unk>"] then the size-2 most frequent words of `lines` (ties broken by the word)."""
    import re
    from collections import Counter
    counts = Counter(w for line in lines for w in re.findall(WORD_PATTERN, line.lower()))  # never "<unk>", "</s>"
    return ["</s>", "<unk>"] + sorted(counts, key=lambda w: (-counts[w], w))[:size - 2]


def word_ids(lines, vocab: list[str]):
    """int64 ids of the words of every line followed by "</s>"; words outside vocab are "<unk>"."""
    import re

    import numpy as np
    index = {w: i for i, w in enumerate(vocab)}
    unk, end = index["<unk>"], index["</s>"]
    ids = [i for line in lines for i in [index.get(w, unk) for w in re.findall(WORD_PATTERN, line.lower())] + [end]]
    return np.array(ids, dtype=np.int64)


def generator(seed: int):
    """A seeded torch.Generator made in the student's process (a Generator cannot cross the wire), so
    a check never depends on the student's module having imported torch under that name."""
    import torch
    return torch.Generator().manual_seed(int(seed))


def seed_global_generator(seed: int) -> None:
    """Seed the student's process's global generators (numpy's legacy one, Python's `random`, and torch's
    where the process has torch) before a call that must not draw from any of them."""
    import random
    import sys

    import numpy as np
    np.random.seed(int(seed) % 2 ** 32)
    random.seed(int(seed))
    if "torch" in sys.modules:  # never imported here: numpy-only assignments run without torch
        sys.modules["torch"].manual_seed(int(seed))


def global_draws(n: int):
    """n uniform draws from each global generator in the student's process, after that call: a (3, n) float64
    array of torch's (NaN where the process has no torch), numpy's and Python's. The grader compares them with
    its own draws from the same seed (purity.assert_global_generators_untouched)."""
    import random
    import sys

    import numpy as np
    torch = sys.modules.get("torch")
    first = torch.rand(int(n), dtype=torch.float64).numpy() if torch is not None else np.full(int(n), np.nan)
    return np.stack([first, np.random.random_sample(int(n)), np.array([random.random() for _ in range(int(n))])])


def optimizer_run(class_name: str):
    """A function that builds the student's optimizer class `class_name` over fresh parameters and
    steps it twice, returning the parameters and every tensor the optimizer keeps (its moments):
    probed with `assert_device_agnostic`, its state must be on the parameters' device and dtype."""
    import sys
    optimizer_class = getattr(sys.modules["submission"], str(class_name))

    def run(params, grads, lr):
        leaves = [p.detach().clone().requires_grad_(True) for p in params]
        optimizer = optimizer_class(leaves, lr=lr)
        for _ in range(2):
            for p, g in zip(leaves, grads):
                p.grad = g.clone()
            optimizer.step()
        return [p.detach() for p in leaves] + [v.detach() for v in _tensors_in(vars(optimizer)) if v.is_floating_point()]
    return run


def _tensors_in(value, depth: int = 0) -> list:
    """The tensors held in nested lists, tuples and dicts (an optimizer's moments, however kept)."""
    import torch
    if isinstance(value, torch.Tensor):
        return [value]
    if depth < 4 and isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v, depth + 1)]
    if depth < 4 and isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v, depth + 1)]
    return []


def load_weights(module, state: dict) -> dict:
    """The grader's weights into a student's module by parameter name, in the student's process.

    Extra buffers and attributes of the student's own (a persistent `positions` table, say) stay as
    they are; what the grader checks is that every parameter has a weight and every weight a
    parameter. A false report only leaves weights unloaded, which the compared outputs then show.
    """
    result = module.load_state_dict(state, strict=False)
    parameters = {name for name, _ in module.named_parameters()}
    return {"parameters_without_weights": [k for k in result.missing_keys if k in parameters],
            "weights_without_parameters": list(result.unexpected_keys)}


FACTORIES = {"TableLM": TableLM, "NextWordProbe": NextWordProbe, "random_sentences": random_sentences,
             "smooth_function": smooth_function, "Generator": generator,
             "seed_global_generator": seed_global_generator, "global_draws": global_draws,
             "load_weights": load_weights, "optimizer_run": optimizer_run}
