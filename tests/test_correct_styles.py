"""Correct code written in ordinary Python styles keeps full marks (issues 30 and 31).

Each style is a small, realistic variant of a staff function: `import operator` with
`functools.reduce(operator.mul, ...)`, an `Enum`, parameters made by `setattr(self, name, ...)`
over literal names, `type(self).__name__` in a `__repr__`, `__constants__ = ["eps"]`, a load-time
`print(LayerNorm.__name__)`, a dtype or a mask dtype kept in a `self.` attribute, dataclasses,
NamedTuples, properties, closures, `match`, walrus, ... Every style must be inside the subset the
grader reads (autograder.sandbox.policy) and use no banned routine; and all the styles of an
assignment, applied together to its staff solution (they edit different code), must keep every
check of the questions they touch, graded by the real runner.
"""
import pytest

from autograder.authoring import assignments
from autograder.grading import runner
from autograder.sandbox import forbidden, policy
from autograder.sandbox.extract import Cell
from tests.helpers import edited_solution

# assignment -> style -> (replacements on the staff solution, questions whose checks it can affect)

# attention: (name, replacements, questions)
ATTENTION = {
    "matmul and unsqueeze instead of einsum; a load-time print of a class name": (
        [('    scores = torch.einsum("bsd,bd->bs", H_enc, h_dec)  # (B, S)\n'
          '    weights = torch.softmax(scores, dim=-1)  # (B, S)\n'
          '    context = torch.einsum("bs,bsd->bd", weights, H_enc)  # (B, d)\n    return context, weights\n',
          "    scores = (H_enc @ h_dec.unsqueeze(-1)).squeeze(-1)  # (B, S)\n"
          "    weights = torch.softmax(scores, dim=-1)\n"
          "    return (weights.unsqueeze(1) @ H_enc).squeeze(1), weights\n"
          "\n\nprint(f\"{dot_product_attention.__name__} defined\")\n")], {"1"}),
    "functools.partial of torch.softmax kept at module level": (
        [("    query = h_dec @ W  # (B, d_enc)\n"
          '    scores = torch.einsum("bsd,bd->bs", H_enc, query)  # (B, S)\n'
          "    weights = torch.softmax(scores, dim=-1)\n",
          "    query = h_dec @ W  # (B, d_enc)\n"
          '    scores = torch.einsum("bsd,bd->bs", H_enc, query)  # (B, S)\n'
          "    weights = _softmax_last(scores)\n"),
         ("def bilinear_attention(h_dec, H_enc, W):\n",
          "import functools\n\n_softmax_last = functools.partial(torch.softmax, dim=-1)\n\n\n"
          "def bilinear_attention(h_dec, H_enc, W):\n")], {"1"}),
    "string annotations, walrus and torch.where": (
        [("def scaled_dot_product_attention(q, k, v, mask=None):\n",
          'def scaled_dot_product_attention(q: "torch.Tensor", k: "torch.Tensor", v: "torch.Tensor",\n'
          '                                 mask: "torch.Tensor | None" = None) -> "tuple[torch.Tensor, torch.Tensor]":\n'),
         ("    if mask is not None:\n        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)\n"
          "    weights = torch.softmax(scores, dim=-1)\n"
          "    if mask is not None:  # a row with nothing to attend to: uniform after the fill, so zero it\n"
          "        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n",
          "    if (m := mask) is not None:\n"
          "        scores = torch.where(m, scores, torch.finfo(scores.dtype).min)\n"
          "    weights = torch.softmax(scores, dim=-1)\n"
          "    if m is not None:\n"
          "        weights = torch.where(m.any(dim=-1, keepdim=True), weights, torch.zeros((), dtype=weights.dtype,\n"
          "                                                                              device=weights.device))\n")],
        {"2"}),
    "a match statement on values and a mask from tril": (
        [('    T_k = T_q if T_k is None else T_k\n    i = torch.arange(T_q, device=device)[:, None]  # (T_q, 1)\n'
          '    j = torch.arange(T_k, device=device)[None, :]  # (1, T_k)\n    return j <= i + (T_k - T_q)\n',
          "    match T_k:\n        case None:\n            T_k = T_q\n        case int():\n            pass\n"
          "    return torch.ones(T_q, T_k, dtype=torch.bool, device=device).tril(diagonal=T_k - T_q)\n")], {"3"}),
    "unflatten and flatten; functools.reduce(operator.mul, ...)": (
        [("    B, T, d_model = x.shape\n    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)\n",
          "    return x.unflatten(-1, (n_heads, -1)).transpose(1, 2)\n"),
         ("    B, h, T, d_head = x.shape\n    return x.transpose(1, 2).reshape(B, T, h * d_head)\n",
          "    B, h, T, d_head = x.shape\n"
          "    return x.transpose(1, 2).reshape(B, T, functools.reduce(operator.mul, (h, d_head), 1))\n"),
         ("def merge_heads(x):\n", "import functools\nimport operator\n\n\ndef merge_heads(x):\n")], {"4"}),
    "projections made by setattr over literal names; __constants__; a __repr__ with type(self).__name__": (
        [("        self.d_model, self.n_heads = d_model, n_heads\n"
          "        self.q_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.k_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.v_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n\n"
          "    def forward(self, x, context=None, mask=None):\n",
          "        self.d_model, self.n_heads = d_model, n_heads\n"
          '        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):\n'
          "            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))\n\n"
          "    def __repr__(self):\n"
          '        return f"{type(self).__name__}(d_model={self.d_model}, n_heads={self.n_heads})"\n\n'
          "    def forward(self, x, context=None, mask=None):\n"),
         ('class MultiHeadAttention(nn.Module):\n    """Multi-head (self- or cross-) attention, written with your '
          'scaled_dot_product_attention."""\n',
          'class MultiHeadAttention(nn.Module):\n    """Multi-head (self- or cross-) attention, written with your '
          'scaled_dot_product_attention."""\n\n    __constants__ = ["d_model", "n_heads"]\n'),
         ("        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T_q, d_head)\n"
          "        k = split_heads(self.k_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n"
          "        v = split_heads(self.v_proj(context), self.n_heads)  # (B, h, T_k, d_head)\n",
          "        q, k, v = (split_heads(getattr(self, name)(y), self.n_heads)\n"
          '                   for name, y in zip(("q_proj", "k_proj", "v_proj"), (x, context, context), strict=True))\n')],
        {"4"}),
    "a property for the group size and expand instead of repeat_interleave": (
        [("        group = self.n_heads // self.n_kv_heads\n"
          "        k = k.repeat_interleave(group, dim=1)  # (B, h, T, d_head)\n"
          "        v = v.repeat_interleave(group, dim=1)\n",
          "        B, h_kv, T, d_head = k.shape\n"
          "        k = k[:, :, None].expand(B, h_kv, self.group, T, d_head).reshape(B, self.n_heads, T, d_head)\n"
          "        v = v[:, :, None].expand(B, h_kv, self.group, T, d_head).reshape(B, self.n_heads, T, d_head)\n"),
         ('    def forward(self, x, mask=None):\n        """x: (B, T, d_model) -> (B, T, d_model)."""\n'
          "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T, d_head)\n",
          "    @property\n    def group(self) -> int:\n        return self.n_heads // self.n_kv_heads\n\n"
          '    def forward(self, x, mask=None):\n        """x: (B, T, d_model) -> (B, T, d_model)."""\n'
          "        q = split_heads(self.q_proj(x), self.n_heads)  # (B, h, T, d_head)\n")], {"5"}),
    "torch.outer and a stacked table cut to d": (
        [("    pos = torch.arange(T, device=device, dtype=torch.float64)[:, None]  # (T, 1)\n"
          "    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)\n"
          "    table = torch.zeros(T, d, device=device, dtype=torch.float64)\n"
          "    table[:, 0::2] = torch.sin(pos * freq)\n    table[:, 1::2] = torch.cos(pos * freq[: d // 2])\n"
          "    return table.to(dtype)\n",
          "    angles = torch.outer(torch.arange(T, device=device, dtype=torch.float64),\n"
          "                         10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d))\n"
          "    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)[:, :d].to(dtype)\n")], {"6"}),
    "super(Class, self).__init__() and a slice of the embedding table": (
        [("    def __init__(self, max_len, d_model):\n        super().__init__()\n        self.table = nn.Embedding(max_len, d_model)\n",
          "    def __init__(self, max_len, d_model):\n        super(LearnedPositions, self).__init__()\n"
          "        self.table = nn.Embedding(max_len, d_model)\n"),
         ("        positions = torch.arange(x.size(1), device=x.device)  # (T,)\n"
          "        return x + self.table(positions)  # (B, T, d) + (T, d)\n",
          "        return x + self.table.weight[: x.size(1)]\n")], {"6"}),
    "rope by unflatten and unbind": (
        [("    even, odd = x[..., 0::2], x[..., 1::2]\n"
          "    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
          "    return out.flatten(-2)\n",
          "    even, odd = x.unflatten(-1, (-1, 2)).unbind(-1)\n"
          "    return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)\n")], {"6"}),
    "lru_cache on a pure helper, itertools.islice and math.isclose": (
        [("    def geometric(n):\n        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]\n\n"
          "    p = 2 ** math.floor(math.log2(n_heads))\n    slopes = geometric(p)\n"
          "    if p < n_heads:\n        slopes += geometric(2 * p)[0::2][: n_heads - p]\n    return torch.tensor(slopes)\n",
          "    p = 2 ** math.floor(math.log2(n_heads))\n    slopes = list(_geometric(p))\n"
          "    if not math.isclose(p, n_heads):\n"
          "        slopes.extend(itertools.islice(_geometric(2 * p), 0, 2 * (n_heads - p), 2))\n"
          "    return torch.tensor(slopes)\n\n\n"
          "@functools.lru_cache(maxsize=None)\ndef _geometric(n: int) -> tuple[float, ...]:\n"
          "    return tuple(2.0 ** (-8.0 * (i + 1) / n) for i in range(n))\n"),
         ("def alibi_slopes(n_heads):\n", "import functools\nimport itertools\n\n\ndef alibi_slopes(n_heads):\n")],
        {"6"}),
    "a frozen dataclass for the head sizes and a mask dtype kept in an attribute (torch.bool)": (
        [("        assert d_model % n_heads == 0 and n_heads % n_kv_heads == 0\n"
          "        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads\n        self.d_head = d_model // n_heads\n",
          "        sizes = HeadSizes(d_model, n_heads, n_kv_heads)\n"
          "        self.n_heads, self.n_kv_heads, self.d_head = sizes.n_heads, sizes.n_kv_heads, sizes.d_head\n"
          "        self.mask_dtype = torch.bool\n"),
         ("        out, _ = scaled_dot_product_attention(q, k, v, mask)\n        return self.out_proj(merge_heads(out))\n",
          "        mask = None if mask is None else mask.to(self.mask_dtype)  # a 0/1 mask works too\n"
          "        out, _ = scaled_dot_product_attention(q, k, v, mask)\n        return self.out_proj(merge_heads(out))\n"),
         ("class GroupedQueryAttention(nn.Module):\n",
          "from dataclasses import dataclass\n\n\n@dataclass(frozen=True)\nclass HeadSizes:\n    d_model: int\n"
          "    n_heads: int\n    n_kv_heads: int\n\n    def __post_init__(self):\n"
          "        assert self.d_model % self.n_heads == 0 and self.n_heads % self.n_kv_heads == 0\n\n"
          "    @property\n    def d_head(self) -> int:\n        return self.d_model // self.n_heads\n\n\n"
          "class GroupedQueryAttention(nn.Module):\n")], {"5"}),
}

NGRAM = {
    "a compiled pattern kept at module level; typing.List": (
        [("def tokenize(line: str) -> list[str]:\n", "_TOKEN = re.compile(r\"[a-z]+(?:'[a-z]+)*|[^\\sa-z]\")\n\n\n"
          "def tokenize(line: str) -> List[str]:\n"),
         ("    return re.findall(r\"[a-z]+(?:'[a-z]+)*|[^\\sa-z]\", line.lower())\n",
          "    return _TOKEN.findall(line.lower())\n"),
         ("import re\n", "import re\nfrom typing import List\n")], {"1"}),
    "itertools.chain.from_iterable into a Counter; string annotations": (
        [("def build_vocab(sentences: list[list[str]], min_count: int = 2) -> set[str]:\n",
          'def build_vocab(sentences: "list[list[str]]", min_count: "int" = 2) -> "set[str]":\n'),
         ("    counts = Counter(token for sentence in sentences for token in sentence)\n"
          "    vocab = {token for token, count in counts.items() if count >= min_count}\n"
          '    vocab |= {"</s>", "<unk>"}\n    vocab.discard("<s>")\n    return vocab\n',
          "    counts = Counter(itertools.chain.from_iterable(sentences))\n"
          '    return ({token for token, count in counts.items() if count >= min_count} | {"</s>", "<unk>"}) - {"<s>"}\n'),
         ("from collections import Counter\n\n\ndef build_vocab(", "import itertools\nfrom collections import Counter\n\n\n"
          "def build_vocab(")], {"1"}),
    "map with a lambda; starred unpacking in a list display": (
        [('    return [token if token in vocab else "<unk>" for token in tokens]\n',
          '    return list(map(lambda token: token if token in vocab else "<unk>", tokens))\n'),
         ('    return ["<s>"] * (n - 1) + list(tokens) + ["</s>"]\n', '    return [*["<s>"] * (n - 1), *tokens, "</s>"]\n')],
        {"1", "2"}),
    "collections.defaultdict and itertools.islice windows": (
        [("    counts = Counter()\n    for sentence in sentences:\n        padded = pad(sentence, n)\n"
          "        counts.update(zip(*(padded[i:] for i in range(n))))\n    return dict(counts)\n",
          "    counts = defaultdict(int)\n    for sentence in sentences:\n        padded = pad(sentence, n)\n"
          "        for gram in zip(*(itertools.islice(padded, i, None) for i in range(n))):\n"
          "            counts[gram] += 1\n    return dict(counts)\n"),
         ("from collections import Counter\n\n\ndef count_ngrams(", "import itertools\nfrom collections import defaultdict\n\n\n"
          "def count_ngrams(")], {"2"}),
    "a dataclass model with fields and a __post_init__": (
        [("    def __init__(self, n: int, vocab: set[str], k: float = 0.0):\n        self.n = n\n        self.vocab = vocab\n"
          "        self.k = k\n        self.counts = {}          # n-gram tuple -> count\n"
          "        self.context_counts = {}  # (n-1)-tuple context -> total count of n-grams starting with it\n",
          "    n: int\n    vocab: set\n    k: float = 0.0\n    counts: dict = field(default_factory=dict, repr=False)\n"
          "    context_counts: dict = field(default_factory=dict, repr=False)\n\n"
          "    def __post_init__(self):\n        if self.n < 1:\n            raise ValueError(f\"n must be >= 1, got {self.n}\")\n"),
         ("import math\nfrom collections import Counter\n\n\nclass NGramLM:\n",
          "import math\nfrom collections import Counter\nfrom dataclasses import dataclass, field\n\n\n@dataclass\nclass NGramLM:\n")],
        {"3"}),
    "__slots__, __iter__ and __len__, and a classmethod": (
        [("    def __init__(self, models: list, lambdas: list[float]):\n        self.models = models\n",
          '    __slots__ = ("models", "lambdas", "n", "vocab")\n\n'
          "    def __init__(self, models: list, lambdas: list[float]):\n        self.models = models\n"),
         ("        return sum(weight * model.prob(word, context)\n"
          "                   for weight, model in zip(self.lambdas, self.models))\n",
          "        return sum(weight * model.prob(word, context) for weight, model in self)\n\n"
          "    def __iter__(self):\n        return iter(zip(self.lambdas, self.models, strict=True))\n\n"
          "    def __len__(self) -> int:\n        return len(self.models)\n\n"
          "    @classmethod\n    def uniform(cls, models: list) -> \"InterpolatedLM\":\n"
          "        return cls(models, [1.0 / len(models)] * len(models))\n")], {"3"}),
    "scores in a list, min over indices with __getitem__": (
        [("    return min(candidates,\n"
          "               key=lambda lambdas: perplexity(InterpolatedLM(models, lambdas), sentences))\n",
          "    scores = [perplexity(InterpolatedLM(models, lambdas), sentences) for lambdas in candidates]\n"
          "    return candidates[min(range(len(candidates)), key=scores.__getitem__)]\n")], {"3"}),
    "enumerate with start, a walrus and math.isinf": (
        [("    history = [\"<s>\"] * (lm.n - 1) + list(tokens)\n    total = 0.0\n"
          "    for i, word in enumerate(list(tokens) + [\"</s>\"]):\n"
          "        total += lm.logprob(word, tuple(history[:lm.n - 1 + i]))\n    return total\n",
          "    history = [\"<s>\"] * (lm.n - 1) + list(tokens)\n    total = 0.0\n"
          "    for end, word in enumerate([*tokens, \"</s>\"], start=lm.n - 1):\n"
          "        total += lm.logprob(word, tuple(history[:end]))\n    return total\n"),
         ("    total_logprob = sum(sentence_logprob(lm, sentence) for sentence in sentences)\n"
          "    num_tokens = sum(len(sentence) + 1 for sentence in sentences)\n"
          "    if total_logprob == -math.inf:\n        return math.inf\n",
          "    num_tokens = sum(len(sentence) + 1 for sentence in sentences)\n"
          "    if math.isinf(total_logprob := sum(sentence_logprob(lm, sentence) for sentence in sentences)):\n"
          "        return math.inf\n")], {"4"}),
    "an Enum for the decoding mode and a match on it": (
        [("    rng = random.Random(seed)\n    words = sorted(lm.vocab)\n",
          "    mode = Mode.GREEDY if greedy else Mode.SAMPLE\n    rng = random.Random(seed)\n    words = sorted(lm.vocab)\n"),
         ("        if greedy:\n            word = words[max(range(len(words)), key=probs.__getitem__)]\n"
          "        else:\n            word = rng.choices(words, weights=probs)[0]\n",
          "        match mode:\n            case Mode.GREEDY:\n"
          "                word = words[max(range(len(words)), key=probs.__getitem__)]\n"
          "            case Mode.SAMPLE:\n                word = rng.choices(words, weights=probs)[0]\n"),
         ("import random\n\n\ndef generate(", "import enum\nimport random\n\n\nclass Mode(enum.Enum):\n"
          "    GREEDY = enum.auto()\n    SAMPLE = enum.auto()\n\n\ndef generate(")], {"5"}),
    "a read-only property and a staticmethod": (
        [("    def __init__(self, vocab: set[str], discount: float = 0.75):\n        self.n = 2\n",
          "    def __init__(self, vocab: set[str], discount: float = 0.75):\n"),
         ("        v = context[-1] if len(context) > 0 else \"<s>\"\n",
          "        v = self._last(context)\n"),
         ("        self.num_types = len(self.bigram_counts)  # N1+(. .)\n        return self\n",
          "        self.num_types = len(self.bigram_counts)  # N1+(. .)\n        return self\n\n"
          "    @property\n    def n(self) -> int:\n        return 2\n\n"
          "    @staticmethod\n    def _last(context) -> str:\n        return context[-1] if len(context) > 0 else \"<s>\"\n")],
        {"7"}),
    "itertools.pairwise over a padded sentence into a Counter": (
        [("        self.bigram_counts = count_ngrams(sentences, 2)\n",
          "        self.bigram_counts = dict(Counter(pair for sentence in sentences\n"
          "                                          for pair in itertools.pairwise(pad(sentence, 2))))\n")],
        {"7"}),
    "try/except ValueError as err around math.log": (
        [("        return (count + self.k) / (context_count + self.k * len(self.vocab))\n\n"
          "    def logprob(self, word: str, context) -> float:\n"
          '        """Return the natural log of prob(word, context), or -math.inf if it is 0."""\n'
          "        p = self.prob(word, context)\n        return math.log(p) if p > 0 else -math.inf\n",
          "        return (count + self.k) / (context_count + self.k * len(self.vocab))\n\n"
          "    def logprob(self, word: str, context) -> float:\n"
          '        """Return the natural log of prob(word, context), or -math.inf if it is 0."""\n'
          "        p = self.prob(word, context)\n        try:\n            return math.log(p)\n"
          "        except ValueError as err:  # math domain error: log(0)\n            if p == 0:\n"
          "                return -math.inf\n"
          '            raise ValueError(f"probability {p!r} of {word!r}: {err}") from err\n')], {"3", "4"}),
    "a deque of the last n-1 words as the context": (
        [('    context = ("<s>",) * (lm.n - 1)\n', '    context = deque(["<s>"] * (lm.n - 1), maxlen=lm.n - 1)\n'),
         ("        probs = [lm.prob(word, context) for word in words]\n",
          "        probs = [lm.prob(word, tuple(context)) for word in words]\n"),
         ("        context = context + (word,)\n", "        context.append(word)\n"),
         ("def generate(lm, max_len: int = 20,", "from collections import deque\n\n\n"
          "def generate(lm, max_len: int = 20,")], {"5"}),
    # the blind-spot hunt's B5-B9: each was refused by the policy and cost its class's checks
    "an abstract base class with an abstractmethod (from abc import ABC)": (
        [("class InterpolatedLM:\n",
          "from abc import ABC, abstractmethod\n\n\nclass LanguageModel(ABC):\n"
          '    """What every model here offers."""\n\n    @abstractmethod\n    def prob(self, word: str, context) -> float:\n'
          "        ...\n\n\nclass InterpolatedLM(LanguageModel):\n")], {"3"}),
    "mixture weights normalized in a frozen dataclass's __post_init__ with object.__setattr__": (
        [("        self.lambdas = lambdas\n", "        self.lambdas = Mixture(lambdas).weights\n"),
         ("class InterpolatedLM", "import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\nclass Mixture:\n"
          '    """Mixture weights, kept as a tuple of floats (immutable)."""\n    weights: tuple\n\n'
          "    def __post_init__(self):\n        object.__setattr__(self, \"weights\", tuple(float(w) for w in self.weights))\n"
          "\n\nclass InterpolatedLM")], {"3"}),
    "a __repr__ showing self.__dict__ without the counts": (
        [('    def fit(self, sentences: list[list[str]]) -> "NGramLM":\n',
          "    def __repr__(self) -> str:\n"
          "        shown = {key: value for key, value in self.__dict__.items() if \"counts\" not in key}\n"
          '        return f"NGramLM({shown})"\n\n'
          '    def fit(self, sentences: list[list[str]]) -> "NGramLM":\n')], {"3"}),
    "a __repr__ by vars(self); attributes set by setattr over a dict of keywords": (
        [('    def fit(self, sentences: list[list[str]]) -> "KneserNeyLM":\n',
          '    def __repr__(self) -> str:\n        return f"KneserNeyLM({vars(self)})"\n\n'
          '    def fit(self, sentences: list[list[str]]) -> "KneserNeyLM":\n'),
         ("        self.vocab = vocab\n        self.discount = discount\n",
          "        for name, value in dict(vocab=vocab, discount=discount).items():\n"
          "            setattr(self, name, value)\n")], {"7"}),
}

BACKPROP = {
    "numpy ufuncs with out= and string annotations": (
        [("def softmax(z: np.ndarray) -> np.ndarray:\n", 'def softmax(z: "np.ndarray") -> "np.ndarray":\n'),
         ("    z = np.asarray(z, dtype=np.float64)\n    exp = np.exp(z - z.max(axis=-1, keepdims=True))\n"
          "    return exp / exp.sum(axis=-1, keepdims=True)\n",
          "    exp = np.subtract(z, np.max(z, axis=-1, keepdims=True), dtype=np.float64)\n"
          "    np.exp(exp, out=exp)\n    exp /= np.sum(exp, axis=-1, keepdims=True)\n    return exp\n")], {"1"}),
    "a nested log-sum-exp helper (a closure over nothing)": (
        [("    z = np.asarray(z, dtype=np.float64)\n    shifted = z - z.max(axis=-1, keepdims=True)\n"
          "    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))\n",
          "    def logsumexp(a):\n        top = a.max(axis=-1, keepdims=True)\n"
          "        return top + np.log(np.exp(a - top).sum(axis=-1, keepdims=True))\n\n"
          "    z = np.asarray(z, dtype=np.float64)\n    shifted = z - z.max(axis=-1, keepdims=True)\n"
          "    return shifted - logsumexp(shifted)\n")], {"1"}),
    "np.take_along_axis for the picked log-probabilities": (
        [("    logp = log_softmax(logits)\n    return float(-logp[np.arange(len(targets)), targets].mean())\n",
          "    picked = np.take_along_axis(log_softmax(logits), np.asarray(targets)[:, None], axis=-1)\n"
          "    return float(-picked.mean())\n")], {"1"}),
    "broadcasting for the Jacobian; a one-hot from np.eye": (
        [("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)\n",
          "    p = softmax(z)\n    return p[:, None] * (np.eye(p.size) - p[None, :])\n"),
         ("    B = logits.shape[0]\n    grad = softmax(logits)\n    grad[np.arange(B), targets] -= 1.0\n    return grad / B\n",
          "    B, V = logits.shape\n    return (softmax(logits) - np.eye(V)[targets]) / B\n")], {"2"}),
    "zip(strict=True) over ids and rows in the embedding backward": (
        [("    dE = np.zeros((vocab_size, dout.shape[-1]))\n    np.add.at(dE, ids, dout)\n    return dE\n",
          "    d = dout.shape[-1]\n    dE = np.zeros((vocab_size, d))\n"
          "    for i, row in zip(np.ravel(ids), dout.reshape(-1, d), strict=True):\n        dE[i] += row\n    return dE\n")],
        {"3"}),
    "a NamedTuple holding what the backward pass needs": (
        [("    B, k = contexts.shape\n    e = embedding_forward(E, contexts).reshape(B, -1)  # (B, k*d)\n"
          "    h = tanh_forward(linear_forward(e, W, b))  # (B, H)\n    z = linear_forward(h, U, b2)  # (B, V)\n"
          "    loss = cross_entropy(z, targets)\n    dz = cross_entropy_grad(z, targets)  # (B, V)\n"
          "    dh, dU, db2 = linear_backward(dz, h, U)\n    da = tanh_backward(dh, h)  # (B, H)\n"
          "    de, dW, db = linear_backward(da, e, W)\n",
          "    B, k = contexts.shape\n    saved = Saved(e=embedding_forward(E, contexts).reshape(B, -1), h=None, z=None)\n"
          "    saved = saved._replace(h=tanh_forward(linear_forward(saved.e, W, b)))\n"
          "    saved = saved._replace(z=linear_forward(saved.h, U, b2))\n"
          "    loss = cross_entropy(saved.z, targets)\n    dz = cross_entropy_grad(saved.z, targets)\n"
          "    dh, dU, db2 = linear_backward(dz, saved.h, U)\n    da = tanh_backward(dh, saved.h)\n"
          "    de, dW, db = linear_backward(da, saved.e, W)\n"),
         ("def ffnn_loss_and_grads(params: dict, contexts: np.ndarray, targets: np.ndarray):\n",
          "from typing import NamedTuple, Optional\n\n\n"
          "class Saved(NamedTuple):\n    e: np.ndarray\n    h: Optional[np.ndarray]\n    z: Optional[np.ndarray]\n\n\n"
          "def ffnn_loss_and_grads(params: dict, contexts: np.ndarray, targets: np.ndarray):\n")], {"4"}),
    "np.ndindex over the entries; a dataclass result converted to the asked tuple": (
        [("    x = np.array(x, dtype=np.float64)  # a copy we may change\n    grad = np.zeros_like(x)\n"
          "    flat_x, flat_grad = x.reshape(-1), grad.reshape(-1)  # views\n    for i in range(flat_x.size):\n"
          "        old = flat_x[i]\n        flat_x[i] = old + eps\n        f_plus = f(x)\n        flat_x[i] = old - eps\n"
          "        f_minus = f(x)\n        flat_x[i] = old\n        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n    return grad\n",
          "    x = np.array(x, dtype=np.float64)  # a copy we may change\n    grad = np.zeros_like(x)\n"
          "    for index in np.ndindex(x.shape):\n        old = x[index]\n        x[index] = old + eps\n"
          "        f_plus = f(x)\n        x[index] = old - eps\n        f_minus = f(x)\n        x[index] = old\n"
          "        grad[index] = (f_plus - f_minus) / (2 * eps)\n    return grad\n"),
         ("    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))\n    return bool(error <= tol), error\n",
          "    check = Check(relative_error(analytic_grad, numerical_gradient(f, x, eps)), tol)\n"
          "    return check.ok, check.error\n\n\n@dataclass(frozen=True)\nclass Check:\n    error: float\n    tol: float\n\n"
          "    @property\n    def ok(self) -> bool:\n        return bool(self.error <= self.tol)\n"),
         ("import numpy as np\n\n\ndef numerical_gradient(", "from dataclasses import dataclass\n\nimport numpy as np\n\n\n"
          "def numerical_gradient(")], {"5"}),
    "np.multiply and np.square in the tanh backward; math.prod for the flat size": (
        [("    return dout * (1.0 - h ** 2)\n", "    return np.multiply(dout, 1.0 - np.square(h))\n"),
         ("    B = contexts.shape[0]\n    e = embedding_forward(params[\"E\"], contexts).reshape(B, -1)\n",
          "    B = contexts.shape[0]\n    e = embedding_forward(params[\"E\"], contexts).reshape(\n"
          "        B, math.prod(contexts.shape[1:]) * params[\"E\"].shape[1])\n"),
         ("import numpy as np\n\n\ndef init_params(", "import math\n\nimport numpy as np\n\n\ndef init_params(")],
        {"3", "4"}),
    "functools.wraps on a decorator of the student's own": (
        [('def relative_error(a: np.ndarray, b: np.ndarray) -> float:\n'
          '    """||a - b|| / max(||a|| + ||b||, 1e-12), Euclidean norms over all entries, as a float."""\n'
          "    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)\n",
          "def float64_arguments(fn):\n    @functools.wraps(fn)\n    def wrapper(*arrays):\n"
          "        return fn(*(np.asarray(a, dtype=np.float64) for a in arrays))\n    return wrapper\n\n\n"
          "@float64_arguments\n"
          'def relative_error(a: np.ndarray, b: np.ndarray) -> float:\n'
          '    """||a - b|| / max(||a|| + ||b||, 1e-12), Euclidean norms over all entries, as a float."""\n'),
         ("def numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:\n",
          "import functools\n\n\ndef numerical_gradient(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:\n")],
        {"5"}),
}

RNN_LM = {
    "parameters made and initialized by setattr/getattr over literal names": (
        [("        self.input_size, self.hidden_size = input_size, hidden_size\n"
          "        self.weight_ih = nn.Parameter(torch.empty(hidden_size, input_size))\n"
          "        self.weight_hh = nn.Parameter(torch.empty(hidden_size, hidden_size))\n"
          "        self.bias_ih = nn.Parameter(torch.empty(hidden_size))\n"
          "        self.bias_hh = nn.Parameter(torch.empty(hidden_size))\n"
          "        bound = 1.0 / math.sqrt(hidden_size)\n        for p in self.parameters():\n"
          "            nn.init.uniform_(p, -bound, bound)\n\n"
          "    def forward(self, x, h):\n"
          '        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""\n'
          "        return torch.tanh(",
          "        self.input_size, self.hidden_size = input_size, hidden_size\n"
          "        shapes = ((hidden_size, input_size), (hidden_size, hidden_size), (hidden_size,), (hidden_size,))\n"
          '        for name, shape in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), shapes, strict=True):\n'
          "            setattr(self, name, nn.Parameter(torch.empty(*shape)))\n"
          "        bound = 1.0 / math.sqrt(hidden_size)\n"
          '        for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):\n'
          "            nn.init.uniform_(getattr(self, name), -bound, bound)\n\n"
          "    def forward(self, x, h):\n"
          '        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""\n'
          "        return torch.tanh(")], {"1"}),
    "a loop over x.unbind(1) with a generator of states": (
        [("        self.cell = RNNCell(input_size, hidden_size)\n\n    def forward(self, x, h0=None):\n"
          '        """x: (B, T, input_size), h0: (B, hidden_size) or None for zeros.\n\n'
          '        Returns (outputs, h_T): outputs (B, T, hidden_size) holds every state h_1..h_T, h_T (B, hidden_size).\n'
          '        """\n'
          "        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0\n"
          "        outputs = []\n        for t in range(x.size(1)):\n            h = self.cell(x[:, t], h)  # (B, H)\n"
          "            outputs.append(h)\n",
          "        self.cell = RNNCell(input_size, hidden_size)\n\n    def forward(self, x, h0=None):\n"
          '        """x: (B, T, input_size), h0: (B, hidden_size) or None for zeros."""\n'
          "        h = torch.zeros(x.size(0), self.cell.hidden_size, dtype=x.dtype, device=x.device) if h0 is None else h0\n"
          "        outputs = []\n        for x_t in x.unbind(1):\n            h = self.cell(x_t, h)\n"
          "            outputs.append(h)\n")], {"1"}),
    "gates split by size and squashed with map(torch.sigmoid, ...)": (
        [("        i, f, g, o = gates.chunk(4, dim=-1)\n"
          "        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)\n"
          "        h = torch.sigmoid(o) * torch.tanh(c)\n",
          "        i, f, g, o = torch.split(gates, self.hidden_size, dim=-1)\n"
          "        i, f, o = map(torch.sigmoid, (i, f, o))\n"
          "        c = f * c + i * torch.tanh(g)\n        h = o * torch.tanh(c)\n")], {"2"}),
    "torch.lerp for the GRU update; add_module with a literal name": (
        [("        return (1 - z) * n + z * h\n", "        return torch.lerp(n, h, z)\n"),
         ("        self.cell = GRUCell(input_size, hidden_size)\n",
          '        self.add_module("cell", GRUCell(input_size, hidden_size))\n')], {"2"}),
    "a stored index dtype (torch.long) and a stored tie flag": (
        [("        self.vocab_size = vocab_size\n        self.embedding = nn.Embedding(vocab_size, emb_dim)\n",
          "        self.vocab_size, self.tied = vocab_size, tie_weights\n        self.index_dtype = torch.long\n"
          "        self.embedding = nn.Embedding(vocab_size, emb_dim)\n"),
         ("        outputs, state = self.rnn(self.embedding(tokens), state)  # (B, T, H)\n",
          "        outputs, state = self.rnn(self.embedding(tokens.to(self.index_dtype)), state)\n")], {"3"}),
    "nll_loss of log_softmax with ignore_index, flatten(0, 1)": (
        [("    logits, _ = model(tokens[:, :-1])  # (B, T-1, V)\n    targets = tokens[:, 1:]  # (B, T-1)\n"
          '    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")\n'
          "    if pad_id is None:\n        return losses.mean()\n"
          "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)\n    return (losses * keep).sum() / keep.sum()\n",
          "    logits, _ = model(tokens[:, :-1])\n"
          "    logp = F.log_softmax(logits.flatten(0, 1), dim=-1)\n"
          "    return F.nll_loss(logp, tokens[:, 1:].flatten(), ignore_index=-100 if pad_id is None else pad_id)\n")],
        {"3"}),
    "a device property read from the parameters": (
        [("        self.cell = LSTMCell(input_size, hidden_size)\n\n    def forward(self, x, state=None):\n",
          "        self.cell = LSTMCell(input_size, hidden_size)\n\n    @property\n    def device(self) -> torch.device:\n"
          "        return self.cell.weight_ih.device\n\n    def forward(self, x, state=None):\n"),
         ("        if state is None:\n            h = x.new_zeros(x.size(0), self.cell.hidden_size)\n            state = (h, h)\n",
          "        if state is None:\n"
          "            h = torch.zeros(x.size(0), self.cell.hidden_size, device=self.device, dtype=x.dtype)\n"
          "            state = (h, torch.zeros_like(h))\n")], {"2"}),
    "the standard helpers students reach for: tqdm and time in train_lm, copy.deepcopy in beam_search, bisect": (
        [("    state, i, losses = None, 0, []\n    for _ in range(steps):\n",
          "    from tqdm.auto import tqdm\n    import time\n    started = time.time()\n"
          "    state, i, losses = None, 0, []\n    for _ in tqdm(range(steps), leave=False):\n"),
         ("                    logits, new_state = model(torch.tensor([[tokens[-1]]], device=device), st)",
          "                    logits, new_state = model(torch.tensor([[tokens[-1]]], device=device), copy.deepcopy(st))"),
         ("def beam_search(model, prefix, beam_size, max_len, eos_id, alpha=1.0):",
          "import copy\n\n\ndef beam_search(model, prefix, beam_size, max_len, eos_id, alpha=1.0):"),
         ("            token = int(torch.multinomial(probs, 1, generator=generator))",
          "            u = float(torch.rand((), generator=generator, dtype=torch.float64))\n"
          "            cumulative = list(itertools.accumulate(probs.tolist()))\n"
          "            token = min(bisect.bisect_right(cumulative, u), probs.numel() - 1)"),
         ("def sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):",
          "import bisect\nimport itertools\n\n\ndef sample(model, prefix, max_len, eos_id, temperature=1.0, seed=0):")],
        {"4", "6"}),
}

TRANSFORMER = {
    "__constants__, register_parameter(None), var_mean, extra_repr and a load-time print(LayerNorm.__name__)": (
        [('    """Layer normalization over the last dimension, with gain `weight` (d,) and bias `bias` (d,) or None."""\n\n'
          "    def __init__(self, d, eps=1e-5, bias=True):\n        super().__init__()\n        self.eps = eps\n"
          "        self.weight = nn.Parameter(torch.ones(d))\n"
          "        self.bias = nn.Parameter(torch.zeros(d)) if bias else None\n",
          '    """Layer normalization over the last dimension, with gain `weight` (d,) and bias `bias` (d,) or None."""\n\n'
          '    __constants__ = ["eps"]\n\n'
          "    def __init__(self, d, eps=1e-5, bias=True):\n        super().__init__()\n        self.eps = eps\n"
          "        self.weight = nn.Parameter(torch.ones(d))\n"
          "        if bias:\n            self.bias = nn.Parameter(torch.zeros(d))\n"
          '        else:\n            self.register_parameter("bias", None)\n\n'
          "    def extra_repr(self) -> str:\n"
          '        return f"{tuple(self.weight.shape)}, eps={self.eps}, bias={self.bias is not None}"\n'),
         ("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n"
          "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased\n",
          "        var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)\n"),
         ("class RMSNorm(nn.Module):\n", "print(LayerNorm.__name__, \"defined\")\n\n\nclass RMSNorm(nn.Module):\n")], {"1"}),
    "a compute dtype kept in an attribute (torch.float32), promoted with the input's": (
        [("        self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d))\n\n    def forward(self, x):\n"
          '        """x: (..., d) -> (..., d)."""\n'
          "        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight\n",
          "        self.eps = eps\n        self.weight = nn.Parameter(torch.ones(d))\n"
          "        self.compute_dtype = torch.float32\n\n    def forward(self, x):\n"
          '        """x: (..., d) -> (..., d)."""\n'
          "        y = x.to(torch.promote_types(x.dtype, self.compute_dtype))\n"
          "        y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
          "        return y.to(x.dtype) * self.weight\n")], {"1"}),
    "an nn.GELU module kept as an attribute": (
        [("        self.fc = nn.Linear(d_model, d_ff, bias=bias)\n        self.proj = nn.Linear(d_ff, d_model, bias=bias)\n\n"
          "    def forward(self, x):\n        \"\"\"x: (..., d_model) -> (..., d_model).\"\"\"\n"
          "        return self.proj(F.gelu(self.fc(x)))\n",
          "        self.fc = nn.Linear(d_model, d_ff, bias=bias)\n        self.act = nn.GELU()\n"
          "        self.proj = nn.Linear(d_ff, d_model, bias=bias)\n\n"
          "    def forward(self, x):\n        \"\"\"x: (..., d_model) -> (..., d_model).\"\"\"\n"
          "        return self.proj(self.act(self.fc(x)))\n")], {"2"}),
    "SwiGLU projections made by setattr over zip of literal names and sizes": (
        [("        self.gate = nn.Linear(d_model, d_ff, bias=bias)\n        self.up = nn.Linear(d_model, d_ff, bias=bias)\n"
          "        self.down = nn.Linear(d_ff, d_model, bias=bias)\n",
          '        for name, (n_in, n_out) in zip(("gate", "up", "down"), ((d_model, d_ff), (d_model, d_ff), (d_ff, d_model))):\n'
          "            setattr(self, name, nn.Linear(n_in, n_out, bias=bias))\n")], {"2"}),
    "einsum scores, a stored mask dtype (torch.bool) and a mask made with triu": (
        [("        self.n_heads, self.d_head, self.rope = n_heads, d_model // n_heads, rope\n",
          "        self.n_heads, self.d_head, self.rope = n_heads, d_model // n_heads, rope\n"
          "        self.mask_dtype = torch.bool\n"),
         ("        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)  # (B, h, T, T_k)\n",
          '        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_head)\n'),
         ("            T_k = k.shape[2]\n            i = torch.arange(T, device=x.device)[:, None] + (T_k - T)\n"
          "            j = torch.arange(T_k, device=x.device)[None, :]\n"
          '            scores = scores.masked_fill(j > i, float("-inf"))\n',
          "            T_k = k.shape[2]\n"
          "            future = torch.ones(T, T_k, dtype=self.mask_dtype, device=x.device).triu(T_k - T + 1)\n"
          '            scores = scores.masked_fill(future, float("-inf"))\n')], {"3"}),
    "a match statement on the norm placement": (
        [("        if self.post_norm:\n            a = self.attn(x, causal=self.causal, cache=cache)\n"
          "            a, new = a if cache is not None else (a, None)\n"
          "            x = self.norm1(x + a)\n            x = self.norm2(x + self.mlp(x))\n"
          "        else:\n            a = self.attn(self.norm1(x), causal=self.causal, cache=cache)\n",
          "        match self.post_norm:\n            case True:\n"
          "                a = self.attn(x, causal=self.causal, cache=cache)\n"
          "                a, new = a if cache is not None else (a, None)\n"
          "                x = self.norm1(x + a)\n                x = self.norm2(x + self.mlp(x))\n"
          "                return x if cache is None else (x, new)\n"
          "        if not self.post_norm:\n            a = self.attn(self.norm1(x), causal=self.causal, cache=cache)\n")],
        {"3"}),
    "a non-persistent register_buffer of positions; param_count as a dict of parts": (
        [("        self.head = nn.Linear(d_model, vocab_size, bias=False)\n",
          "        self.head = nn.Linear(d_model, vocab_size, bias=False)\n"
          '        self.register_buffer("positions", torch.arange(max_len), persistent=False)\n'),
         ("            x = x + self.pos_emb(torch.arange(past, past + idx.shape[1], device=idx.device))\n",
          "            x = x + self.pos_emb(self.positions[past:past + idx.shape[1]])\n"),
         ("    norm = d_model * (2 if bias else 1)\n"
          "    attention = 4 * d_model * d_model + (4 * d_model if bias else 0)\n"
          "    mlp = 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)\n"
          "    total = vocab_size * d_model + n_layers * (attention + mlp + 2 * norm) + norm\n"
          "    total += max_len * d_model if positions == \"learned\" else 0\n"
          "    total += 0 if tie_weights else vocab_size * d_model\n    return total\n",
          "    norm = d_model * (2 if bias else 1)\n    parts = {\n"
          '        "token embedding": vocab_size * d_model,\n'
          '        "attention": n_layers * (4 * d_model * d_model + (4 * d_model if bias else 0)),\n'
          '        "mlp": n_layers * (2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)),\n'
          '        "norms": (2 * n_layers + 1) * norm,\n'
          '        "positions": max_len * d_model if positions == "learned" else 0,\n'
          '        "head": 0 if tie_weights else vocab_size * d_model,\n    }\n'
          "    return sum(parts.values())\n")], {"4"}),
    "an nn.ModuleList filled by append in a loop": (
        [("        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, bias=bias, post_norm=post_norm,\n"
          "                                           rope=positions == \"rope\") for _ in range(n_layers)])\n",
          "        self.blocks = nn.ModuleList()\n        for _ in range(n_layers):\n"
          "            self.blocks.append(Block(d_model, n_heads, d_ff, bias=bias, post_norm=post_norm,\n"
          "                                     rope=positions == \"rope\"))\n")], {"4"}),
}

STYLES = {"attention": ATTENTION, "ngram": NGRAM, "backprop": BACKPROP, "rnn_lm": RNN_LM, "transformer": TRANSFORMER}


def _every_style():
    for assignment_id, table in STYLES.items():
        for name in table:
            yield pytest.param(assignment_id, name, id=f"{assignment_id}: {name}")


def test_the_corpus_covers_every_assignment_with_forty_styles_or_more():
    assert set(STYLES) == {a.id for a in assignments.available()}
    assert sum(len(table) for table in STYLES.values()) >= 40


@pytest.mark.parametrize("assignment_id", sorted(STYLES))
def test_the_styles_of_an_assignment_edit_different_code(assignment_id):
    """They are graded together, so each edit must still find its text after the others."""
    edits = [edit for replacements, _ in STYLES[assignment_id].values() for edit in replacements]
    compile(edited_solution(assignment_id, edits), "submission", "exec")  # each old text found exactly once


@pytest.mark.parametrize("assignment_id, name", list(_every_style()))
def test_each_style_is_inside_the_subset_and_reaches_no_banned_routine(assignment_id, name):
    assignment = assignments.get(assignment_id)
    edits, _ = STYLES[assignment_id][name]
    text = edited_solution(assignment_id, edits)
    cells = [Cell(index=0, number=1, source=text)]
    assert policy.refused(cells, assignment) == {}
    assert forbidden.tainted_names(cells, assignment.forbidden) == {}
    assert policy.loadable(cells, assignment) == cells  # nothing is left out when the cells load


@pytest.mark.parametrize("assignment_id", sorted(STYLES))
def test_the_styles_of_an_assignment_together_keep_full_marks(tmp_path, assignment_id):
    table = STYLES[assignment_id]
    edits = [edit for replacements, _ in table.values() for edit in replacements]
    questions = set().union(*(questions for _, questions in table.values()))
    path = tmp_path / "submission.py"
    path.write_text(edited_solution(assignment_id, edits))
    report = runner.grade(path, assignments.get(assignment_id), device="cpu", questions=questions)
    assert {r.question for r in report.results} == questions
    assert {r.name: r.output for r in report.results if not r.passed} == {}
    assert not [note for note in report.notes if note.startswith("Not run")]
