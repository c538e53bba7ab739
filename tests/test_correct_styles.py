"""Correct code written in ordinary Python styles keeps full marks (issues 30 and 31).

Each style is a small, realistic variant of a staff function: `import operator` with
`functools.reduce(operator.mul, ...)`, an `Enum`, parameters made by `setattr(self, name, ...)`
over literal names, `type(self).__name__` in a `__repr__`, `__constants__ = ["eps"]`, a load-time
`print(LayerNorm.__name__)`, a dtype or a mask dtype kept in a `self.` attribute, dataclasses,
NamedTuples, properties, closures, `match`, walrus, ... Every style must be inside the subset the
grader reads (autograder.sandbox.policy) and use no banned routine; and all the styles of an
assignment, applied together to its staff solution (they edit different code), must keep every
check of the questions they touch, graded by the real runner. A second corpus (`MORE_STYLES`, the
fourth round's hunt) edits the same functions again and is graded as a set of its own; its
`tqdm.auto` import once raised at load in the numpy assignments (asyncio, imported by tqdm.auto,
flags its coroutines' code, which the worker's guard refused).
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

# The fourth round's hunt: more ordinary styles (typing's Final, TypeAlias and Optional, IntEnum, namedtuple,
# functools.cache, a context manager class of the student's own, yield from, match on torch.Tensor() and nn.Linear(),
# torch.no_grad() as a decorator, extra_repr, locals named `lstm` or `attn`, tqdm.auto, ...). They edit the same
# functions as the styles above, so they are graded as a set of their own.
ATTENTION_MORE = {
    "bmm and F.softmax; a local variable named attn": (
        [('    scores = torch.einsum("bsd,bd->bs", H_enc, h_dec)  # (B, S)\n'
          "    weights = torch.softmax(scores, dim=-1)  # (B, S)\n"
          '    context = torch.einsum("bs,bsd->bd", weights, H_enc)  # (B, d)\n    return context, weights\n',
          "    scores = torch.bmm(H_enc, h_dec.unsqueeze(-1)).squeeze(-1)  # (B, S)\n"
          "    attn = F.softmax(scores, dim=-1)\n    return torch.bmm(attn.unsqueeze(1), H_enc).squeeze(1), attn\n"),
         ("def dot_product_attention(h_dec, H_enc):\n",
          "import torch.nn.functional as F\n\n\ndef dot_product_attention(h_dec, H_enc):\n")],
        {"1"}),
    "typing.Optional hints and torch.matmul in bilinear attention": (
        [("    query = h_dec @ W  # (B, d_enc)\n",
          "    query: Optional[torch.Tensor] = torch.matmul(h_dec, W)\n"),
         ("def bilinear_attention(h_dec, H_enc, W):\n",
          "from typing import Optional\n\n\ndef bilinear_attention(h_dec, H_enc, W):\n")],
        {"1"}),
    "a scale factor, mT and a multiply by the any-mask": (
        [("    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)\n",
          "    scale = 1.0 / math.sqrt(q.shape[-1])\n    scores = torch.matmul(q, k.mT) * scale\n"),
         ("        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)\n",
          "        weights = weights * mask.any(dim=-1, keepdim=True)\n")],
        {"2"}),
    "unsqueeze comparisons and Optional[int] hints in the masks": (
        [("def causal_mask(T_q, T_k=None, device=None):\n",
          "def causal_mask(T_q: int, T_k: Optional[int] = None, device: Optional[torch.device] = None) -> "
          "torch.Tensor:\n"),
         ("    return j <= i + (T_k - T_q)\n",
          "    return j.le(i + (T_k - T_q))\n"),
         ("    return torch.arange(T, device=lengths.device)[None, :] < lengths[:, None]\n",
          "    return lengths.unsqueeze(-1) > torch.arange(T, device=lengths.device).unsqueeze(0)\n"),
         ("def causal_mask(",
          "from typing import Optional\n\n\ndef causal_mask(")],
        {"3"}),
    "reshape with a starred shape and permute for the heads": (
        [("    B, T, d_model = x.shape\n    return x.view(B, T, n_heads, d_model // n_heads).transpose(1, 2)\n",
          "    return x.reshape(*x.shape[:-1], n_heads, -1).permute(0, 2, 1, 3)\n"),
         ("    B, h, T, d_head = x.shape\n    return x.transpose(1, 2).reshape(B, T, h * d_head)\n",
          "    return x.permute(0, 2, 1, 3).flatten(start_dim=2)\n")],
        {"4"}),
    "projections unpacked from a generator; extra_repr with f-string = specifiers": (
        [("        self.q_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.k_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.v_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n\n"
          "    def forward(self, x, context=None, mask=None):\n",
          "        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (\n"
          "            nn.Linear(d_model, d_model, bias=bias) for _ in range(4))\n\n"
          '    def extra_repr(self) -> str:\n        return f"{self.d_model=}, {self.n_heads=}"\n\n'
          "    def forward(self, x, context=None, mask=None):\n")],
        {"4"}),
    "a classmethod constructor and xavier init of the projections": (
        [("        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n\n    def forward(self, x, mask=None):\n",
          "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n"
          "        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):\n"
          "            torch.nn.init.xavier_uniform_(proj.weight)\n\n    @classmethod\n"
          '    def multi_query(cls, d_model: int, n_heads: int, bias: bool = True) -> "GroupedQueryAttention":\n'
          "        return cls(d_model, n_heads, 1, bias=bias)\n\n    def forward(self, x, mask=None):\n")],
        {"5"}),
    "exp(-log(base) * k / d) frequencies": (
        [("    freq = 10000.0 ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)  # (ceil(d/2),)\n",
          "    freq = torch.exp(torch.arange(0, d, 2, device=device, dtype=torch.float64) * "
          "(-math.log(10000.0) / d))\n")],
        {"6"}),
    "apply_rope with torch.outer and a complex rotation via polar": (
        [("    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)\n"
          "    cos, sin = torch.cos(angle), torch.sin(angle)\n    even, odd = x[..., 0::2], x[..., 1::2]\n"
          "    out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (..., T, d/2, 2)\n"
          "    return out.flatten(-2)\n",
          "    angle = torch.outer(positions.to(x.dtype), theta)  # (T, d/2)\n"
          "    pairs = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())\n"
          "    rotated = pairs * torch.polar(torch.ones_like(angle), angle)\n"
          "    return torch.view_as_real(rotated).flatten(-2)\n")],
        {"6"}),
    "yield from a generator of slopes": (
        [("    def geometric(n):\n        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]\n",
          "    def powers(n):\n        yield from (2.0 ** (-8.0 * (i + 1) / n) for i in range(n))\n\n"
          "    def geometric(n):\n        return list(powers(n))\n")],
        {"6"}),
    "einsum for the ALiBi bias with Tensor | None hints": (
        [("def alibi_bias(n_heads, T_q, T_k=None, device=None):\n",
          "def alibi_bias(n_heads: int, T_q: int, T_k: int | None = None, device: torch.device | None = None):\n"),
         ("    return alibi_slopes(n_heads).to(device)[:, None, None] * (j - i)  # (h, T_q, T_k)\n",
          "    slopes = alibi_slopes(n_heads).to(device)\n"
          '    return torch.einsum("h,qk->hqk", slopes, (j - i).to(slopes.dtype))\n')],
        {"6"}),
}

NGRAM_MORE = {
    "re.finditer with match.group; a module-level __all__": (
        [('    return re.findall(r"[a-z]+(?:\'[a-z]+)*|[^\\sa-z]", line.lower())\n',
          '    return [match.group(0) for match in re.finditer(r"[a-z]+(?:\'[a-z]+)*|[^\\sa-z]", line.lower())]\n'),
         ("import re\n\n\ndef tokenize(",
          'import re\n\n__all__ = ["tokenize"]\n\n\ndef tokenize(')],
        {"1"}),
    "typing.Final constants; a comprehension variable named `re`": (
        [("    counts = Counter(token for sentence in sentences for token in sentence)\n"
          "    vocab = {token for token, count in counts.items() if count >= min_count}\n"
          '    vocab |= {"</s>", "<unk>"}\n    vocab.discard("<s>")\n    return vocab\n',
          "    counts = Counter(re for sentence in sentences for re in sentence)\n"
          "    vocab = {token for token, count in counts.items() if count >= min_count}\n"
          "    return (vocab | SPECIALS) - {START}\n"),
         ("from collections import Counter\n\n\ndef build_vocab(",
          "from collections import Counter\nfrom typing import Final\n\n"
          'SPECIALS: Final = frozenset({"</s>", "<unk>"})\nSTART: Final[str] = "<s>"\n\n\ndef build_vocab(')],
        {"1"}),
    "a lambda with a default argument bound to the vocabulary": (
        [('    return [token if token in vocab else "<unk>" for token in tokens]\n',
          '    keep = lambda token, known=vocab: token if token in known else "<unk>"  # noqa: E731\n'
          "    return [keep(token) for token in tokens]\n")],
        {"1"}),
    "a generator with yield from for the padding": (
        [('    return ["<s>"] * (n - 1) + list(tokens) + ["</s>"]\n',
          '    def padded():\n        yield from itertools.repeat("<s>", n - 1)\n        yield from tokens\n'
          '        yield "</s>"\n\n    return list(padded())\n'),
         ("def pad(tokens: list[str], n: int) -> list[str]:\n",
          "import itertools\n\n\ndef pad(tokens: list[str], n: int) -> list[str]:\n")],
        {"1", "2"}),
    "a TypeAlias for n-grams and a closure over n for the windows": (
        [("    counts = Counter()\n    for sentence in sentences:\n        padded = pad(sentence, n)\n"
          "        counts.update(zip(*(padded[i:] for i in range(n))))\n    return dict(counts)\n",
          "    def windows(tokens: list[str]) -> Iterator[NGram]:\n"
          "        return zip(*(tokens[i:] for i in range(n)))\n\n    counts: Counter[NGram] = Counter()\n"
          "    for sentence in sentences:\n        counts.update(windows(pad(sentence, n)))\n"
          "    return dict(counts)\n"),
         ("def count_ngrams(sentences: list[list[str]], n: int) -> dict[tuple[str, ...], int]:\n",
          "from typing import Iterator, TypeAlias\n\nNGram: TypeAlias = tuple[str, ...]\n\n\n"
          "def count_ngrams(sentences: list[list[str]], n: int) -> dict[NGram, int]:\n")],
        {"2"}),
    "a class attribute for the start token; k as a property with a validating setter": (
        [("    def __init__(self, n: int, vocab: set[str], k: float = 0.0):\n        self.n = n\n",
          '    START = "<s>"\n\n    def __init__(self, n: int, vocab: set[str], k: float = 0.0):\n'
          "        self.n = n\n"),
         ('            context = (("<s>",) * (self.n - 1) + tuple(context))[-(self.n - 1):]\n',
          "            context = ((self.START,) * (self.n - 1) + tuple(context))[-(self.n - 1):]\n"),
         ("        p = self.prob(word, context)\n        return math.log(p) if p > 0 else -math.inf\n\n\n"
          "import math\n\n\nclass InterpolatedLM:\n",
          "        p = self.prob(word, context)\n        return math.log(p) if p > 0 else -math.inf\n\n"
          "    @property\n    def k(self) -> float:\n        return self._k\n\n    @k.setter\n"
          "    def k(self, value: float) -> None:\n        if value < 0:\n"
          '            raise ValueError(f"k must be >= 0, got {value}")\n        self._k = float(value)\n\n\n'
          "import math\n\n\nclass InterpolatedLM:\n")],
        {"3", "6"}),
    "math.fsum over map(operator.mul, ...) in the mixture": (
        [("        return sum(weight * model.prob(word, context)\n"
          "                   for weight, model in zip(self.lambdas, self.models))\n",
          "        return math.fsum(map(operator.mul, self.lambdas, (model.prob(word, context) for model "
          "in self.models)))\n"),
         ("import math\n\n\nclass InterpolatedLM:\n",
          "import math\nimport operator\n\n\nclass InterpolatedLM:\n")],
        {"3"}),
    "functools.cache on a nested scorer; an assert with a message": (
        [("    return min(candidates,\n"
          "               key=lambda lambdas: perplexity(InterpolatedLM(models, lambdas), sentences))\n",
          '    assert candidates, "need at least one candidate"\n\n    @functools.cache\n'
          "    def score(index: int) -> float:\n"
          "        return perplexity(InterpolatedLM(models, candidates[index]), sentences)\n\n"
          "    return candidates[min(range(len(candidates)), key=score)]\n"),
         ("def tune_lambdas(models: list,",
          "import functools\n\n\ndef tune_lambdas(models: list,")],
        {"3"}),
    "functools.reduce(operator.add, ...) over the log-probabilities": (
        [('    history = ["<s>"] * (lm.n - 1) + list(tokens)\n    total = 0.0\n'
          '    for i, word in enumerate(list(tokens) + ["</s>"]):\n'
          "        total += lm.logprob(word, tuple(history[:lm.n - 1 + i]))\n    return total\n",
          '    history = ["<s>"] * (lm.n - 1) + list(tokens)\n'
          "    terms = (lm.logprob(word, tuple(history[:lm.n - 1 + i]))\n"
          '             for i, word in enumerate([*tokens, "</s>"]))\n'
          "    return functools.reduce(operator.add, terms, 0.0)\n"),
         ("def sentence_logprob(lm, tokens: list[str]) -> float:\n",
          "import functools\nimport operator\n\n\ndef sentence_logprob(lm, tokens: list[str]) -> float:\n")],
        {"4"}),
    "try/except/else around the average; a warnings.warn on an empty corpus": (
        [("    if total_logprob == -math.inf:\n        return math.inf\n"
          "    return math.exp(-total_logprob / num_tokens)\n",
          "    try:\n        average = -total_logprob / num_tokens\n    except ZeroDivisionError:\n"
          '        warnings.warn("perplexity of no sentences", RuntimeWarning, stacklevel=2)\n'
          "        return math.nan\n    else:\n"
          "        return math.inf if math.isinf(average) else math.exp(average)\n"),
         ("def perplexity(lm, sentences: list[list[str]]) -> float:\n",
          "import warnings\n\n\ndef perplexity(lm, sentences: list[list[str]]) -> float:\n")],
        {"4"}),
    "probs.index(max(probs)) and rng.choices with k=1": (
        [("        if greedy:\n            word = words[max(range(len(words)), key=probs.__getitem__)]\n"
          "        else:\n            word = rng.choices(words, weights=probs)[0]\n",
          "        if greedy:\n            word = words[probs.index(max(probs))]\n        else:\n"
          "            (word,) = rng.choices(words, weights=probs, k=1)\n")],
        {"5"}),
    "an IntEnum for the orders and operator.itemgetter for the best k": (
        [("    for n in (1, 2, 3):\n        lm = NGramLM(n, vocab).fit(train)\n",
          "    for n in Order:\n        lm = NGramLM(int(n), vocab).fit(train)\n"),
         ("        lm.k = min(scores, key=scores.get)\n",
          "        lm.k, _ = min(scores.items(), key=operator.itemgetter(1))\n"),
         ("def build_model(train: list[list[str]], validation: list[list[str]]):\n",
          "import enum\nimport operator\n\n\nclass Order(enum.IntEnum):\n    UNIGRAM = enum.auto()\n"
          "    BIGRAM = enum.auto()\n    TRIGRAM = enum.auto()\n\n\n"
          "def build_model(train: list[list[str]], validation: list[list[str]]):\n")],
        {"6"}),
    "a dataclass Kneser-Ney model with an init=False field": (
        [("    def __init__(self, vocab: set[str], discount: float = 0.75):\n        self.n = 2\n"
          "        self.vocab = vocab\n        self.discount = discount\n",
          "    vocab: set\n    discount: float = 0.75\n    n: int = field(default=2, init=False)\n"),
         ("class KneserNeyLM:\n",
          "from dataclasses import dataclass, field\n\n\n@dataclass(eq=False, repr=False)\nclass KneserNeyLM:\n")],
        {"7"}),
    "a namedtuple of the Kneser-Ney statistics": (
        [('        v = context[-1] if len(context) > 0 else "<s>"\n'
          "        p_cont = self.num_preceders.get(word, 0) / self.num_types\n"
          "        c_v = self.context_counts.get(v, 0)\n",
          '        v = context[-1] if len(context) > 0 else "<s>"\n'
          "        stats = Stats(self.context_counts[v], self.num_followers[v], self.num_preceders[word])\n"
          "        p_cont = stats.preceders / self.num_types\n        c_v = stats.count\n"),
         ("        return discounted + d * self.num_followers[v] / c_v * p_cont\n",
          "        return discounted + d * stats.followers / c_v * p_cont\n"),
         ("def build_model(train: list[list[str]]",
          'from collections import namedtuple\n\nStats = namedtuple("Stats", ["count", "followers", "preceders"])\n\n'
          "\ndef build_model(train: list[list[str]]")],
        {"7"}),
    "trange in build_model": (
        [("        for k in (0.001, 0.01, 0.1, 1.0):\n",
          "        for k in tqdm((0.001, 0.01, 0.1, 1.0), disable=True):\n"),
         ("def build_model(train: list[list[str]]",
          "from tqdm.auto import tqdm\n\n\ndef build_model(train: list[list[str]]")],
        {"6"}),
}

BACKPROP_MORE = {
    "np.errstate around the exponentials; np.amax and np.sum": (
        [("    z = np.asarray(z, dtype=np.float64)\n    exp = np.exp(z - z.max(axis=-1, keepdims=True))\n"
          "    return exp / exp.sum(axis=-1, keepdims=True)\n",
          '    z = np.asarray(z, dtype=np.float64)\n    with np.errstate(under="ignore"):\n'
          "        exp = np.exp(z - np.amax(z, axis=-1, keepdims=True))\n"
          "    return exp / np.sum(exp, axis=-1, keepdims=True)\n")],
        {"1"}),
    "np.logaddexp.reduce for the normalizer": (
        [("    shifted = z - z.max(axis=-1, keepdims=True)\n"
          "    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))\n",
          "    shifted = z - z.max(axis=-1, keepdims=True)\n"
          "    return shifted - np.logaddexp.reduce(shifted, axis=-1, keepdims=True)\n")],
        {"1"}),
    "np.einsum for the Jacobian; np.tile for the log-softmax one": (
        [("    p = softmax(z)\n    return np.diag(p) - np.outer(p, p)\n",
          '    p = softmax(z)\n    return np.einsum("i,ij->ij", p, np.eye(p.size)) - np.einsum("i,j->ij", p, p)\n'),
         ("    p = softmax(z)\n    return np.eye(len(p)) - p[None, :]\n",
          "    p = softmax(z)\n    return np.identity(p.size) - np.tile(p, (p.size, 1))\n")],
        {"2"}),
    "np.divide and np.dot in the chain rule": (
        [("    dL_dp = -y / softmax(z)\n    return softmax_jacobian(z).T @ dL_dp\n",
          "    dL_dp = np.divide(np.negative(y), softmax(z))\n    return np.dot(softmax_jacobian(z).T, dL_dp)\n")],
        {"2"}),
    "a collections.namedtuple for the linear backward's result": (
        [("    dx = dout @ W\n    dW = dout.T @ x\n    db = dout.sum(axis=0)\n    return dx, dW, db\n",
          "    return LinearGrads(dx=dout @ W, dW=dout.T @ x, db=dout.sum(axis=0))\n"),
         ("def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:\n",
          'from collections import namedtuple\n\nLinearGrads = namedtuple("LinearGrads", "dx dW db")\n\n\n'
          "def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> np.ndarray:\n")],
        {"3"}),
    "np.bincount per feature for the embedding backward": (
        [("    dE = np.zeros((vocab_size, dout.shape[-1]))\n    np.add.at(dE, ids, dout)\n    return dE\n",
          "    flat_ids = np.asarray(ids).ravel()\n    rows = dout.reshape(flat_ids.size, -1)  # (N, d)\n"
          "    return np.stack([np.bincount(flat_ids, weights=rows[:, j], minlength=vocab_size)\n"
          "                     for j in range(rows.shape[1])], axis=-1).reshape(vocab_size, rows.shape[1])\n")],
        {"3"}),
    "functools.partial of rng.uniform in init_params": (
        [("    rng = np.random.default_rng(seed)\n    return {\n"
          '        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n'
          '        "W": rng.uniform(-1.0, 1.0, size=(hidden, context * dim)) / np.sqrt(context * dim),\n'
          '        "b": np.zeros(hidden),\n'
          '        "U": rng.uniform(-1.0, 1.0, size=(vocab_size, hidden)) / np.sqrt(hidden),\n',
          "    rng = np.random.default_rng(seed)\n    symmetric = functools.partial(rng.uniform, -1.0, 1.0)\n"
          '    return {\n        "E": rng.normal(0.0, 0.1, size=(vocab_size, dim)),\n'
          '        "W": symmetric(size=(hidden, context * dim)) / np.sqrt(context * dim),\n'
          '        "b": np.zeros(hidden),\n        "U": symmetric(size=(vocab_size, hidden)) / np.sqrt(hidden),\n'),
         ("def init_params(vocab_size: int,",
          "import functools\n\n\ndef init_params(vocab_size: int,")],
        {"4"}),
    "global parameter names unpacked by a generator expression": (
        [('    E, W, b, U, b2 = params["E"], params["W"], params["b"], params["U"], params["b2"]\n',
          "    E, W, b, U, b2 = (params[name] for name in PARAM_NAMES)\n"),
         ("def ffnn_forward(params: dict, contexts: np.ndarray) -> np.ndarray:\n",
          'PARAM_NAMES = ("E", "W", "b", "U", "b2")\n\n\n'
          "def ffnn_forward(params: dict, contexts: np.ndarray) -> np.ndarray:\n")],
        {"4"}),
    "a context manager class of the student's own that nudges one entry": (
        [("    for i in range(flat_x.size):\n        old = flat_x[i]\n        flat_x[i] = old + eps\n"
          "        f_plus = f(x)\n        flat_x[i] = old - eps\n        f_minus = f(x)\n        flat_x[i] = old\n"
          "        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n    return grad\n",
          "    for i in range(flat_x.size):\n        with Nudged(flat_x, i, eps):\n            f_plus = f(x)\n"
          "        with Nudged(flat_x, i, -eps):\n            f_minus = f(x)\n"
          "        flat_grad[i] = (f_plus - f_minus) / (2 * eps)\n    return grad\n\n\nclass Nudged:\n"
          '    """Adds delta to flat[i] inside the block, puts the old value back after."""\n\n'
          "    def __init__(self, flat, i, delta):\n        self.flat, self.i, self.delta = flat, i, delta\n\n"
          "    def __enter__(self):\n        self.old = self.flat[self.i]\n"
          "        self.flat[self.i] = self.old + self.delta\n        return self\n\n"
          "    def __exit__(self, *exc_info):\n        self.flat[self.i] = self.old\n        return False\n")],
        {"5"}),
    "np.sqrt of a sum of squares, np.less_equal for the verdict": (
        [("    return float(np.linalg.norm(a - b) / max(np.linalg.norm(a) + np.linalg.norm(b), 1e-12))\n",
          "    def norm(v):\n        return np.sqrt(np.sum(np.square(v)))\n\n"
          "    return float(norm(a - b) / max(norm(a) + norm(b), 1e-12))\n"),
         ("    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))\n"
          "    return bool(error <= tol), error\n",
          "    error = relative_error(analytic_grad, numerical_gradient(f, x, eps))\n"
          "    return bool(np.less_equal(error, tol)), error\n")],
        {"5"}),
    "sliding_window_view for the context windows": (
        [("    contexts = np.stack([padded[i:i + len(ids)] for i in range(context)], axis=1)\n",
          "    contexts = np.lib.stride_tricks.sliding_window_view(padded[:-1], context)[: len(ids)].copy() \\\n"
          "        if context > 0 else np.zeros((len(ids), 0), dtype=ids.dtype)\n")],
        {"6"}),
    "copy.deepcopy of the start; a time.perf_counter timer; losses in a deque": (
        [("    params = {name: np.array(value, dtype=np.float64) for name, value in start.items()}  # a "
          "copy: start is not modified\n",
          "    params = {name: np.asarray(value, dtype=np.float64) for name, value in copy.deepcopy(start).items()}\n"
          "    started = time.perf_counter()\n"),
         ("        losses.append(float(loss))\n    return params, losses\n",
          "        losses.append(float(loss))\n    elapsed = time.perf_counter() - started\n"
          '    assert elapsed >= 0.0, f"{elapsed=}"\n    return params, list(collections.deque(losses))\n'),
         ("def train_ffnn(ids: np.ndarray,",
          "import collections\nimport copy\nimport time\n\n\ndef train_ffnn(ids: np.ndarray,")],
        {"6"}),
    "tqdm.auto progress bar in train_ffnn": (
        [("    for _ in range(steps):\n        batch = rng.integers(0, len(targets), size=batch_size)\n",
          "    for _ in tqdm(range(steps), leave=False):\n"
          "        batch = rng.integers(0, len(targets), size=batch_size)\n"),
         ("def train_ffnn(ids: np.ndarray,",
          "from tqdm.auto import tqdm\n\n\ndef train_ffnn(ids: np.ndarray,")],
        {"6"}),
}

RNN_LM_MORE = {
    "torch.Tensor | None hints; nn.init calls through functools.partial": (
        [("    def forward(self, x, h):\n"
          '        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""\n'
          "        return torch.tanh(",
          "    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:\n"
          '        """x: (B, input_size), h: (B, hidden_size) -> the next state (B, hidden_size)."""\n'
          "        return torch.tanh("),
         ("        self.bias_hh = nn.Parameter(torch.empty(hidden_size))\n"
          "        bound = 1.0 / math.sqrt(hidden_size)\n        for p in self.parameters():\n"
          "            nn.init.uniform_(p, -bound, bound)\n",
          "        self.bias_hh = nn.Parameter(torch.empty(hidden_size))\n"
          "        init = functools.partial(torch.nn.init.uniform_, a=-hidden_size ** -0.5, b=hidden_size ** -0.5)\n"
          "        for p in self.parameters():\n            init(p)\n"),
         ("    def forward(self, x, h0=None):\n"
          '        """x: (B, T, input_size), h0: (B, hidden_size) or None for zeros.\n',
          "    def forward(self, x: torch.Tensor, h0: torch.Tensor | None = None):\n"
          '        """x: (B, T, input_size), h0: (B, hidden_size) or None for zeros.\n'),
         ("class RNNCell(nn.Module):\n",
          "import functools\n\n\nclass RNNCell(nn.Module):\n")],
        {"1"}),
    "unbind over time and a list comprehension": (
        [("        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0\n        outputs = []\n"
          "        for t in range(x.size(1)):\n            h = self.cell(x[:, t], h)  # (B, H)\n"
          "            outputs.append(h)\n        return torch.stack(outputs, dim=1), h\n",
          "        h = x.new_zeros(x.size(0), self.cell.hidden_size) if h0 is None else h0\n        outputs = []\n"
          "        for x_t in x.unbind(dim=1):\n            outputs.append(h := self.cell(x_t, h))\n"
          "        return torch.stack(outputs, dim=1), h\n")],
        {"1"}),
    "F.linear and split by hidden size in the LSTM cell": (
        [("        gates = x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh  # (B, 4H)\n"
          "        i, f, g, o = gates.chunk(4, dim=-1)\n",
          "        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)\n"
          "        i, f, g, o = torch.split(gates, self.hidden_size, dim=-1)\n"),
         ("class LSTMCell(nn.Module):\n",
          "import torch.nn.functional as F\n\n\nclass LSTMCell(nn.Module):\n")],
        {"2"}),
    "a local variable named lstm and an lstm_state": (
        [("        outputs = []\n        for t in range(x.size(1)):\n            state = self.cell(x[:, t], state)\n"
          "            outputs.append(state[0])\n",
          "        lstm, lstm_state, outputs = self.cell, state, []\n        for t in range(x.size(1)):\n"
          "            lstm_state = lstm(x[:, t], lstm_state)\n            outputs.append(lstm_state[0])\n"
          "        state = lstm_state\n")],
        {"2"}),
    "a class attribute for the gate count and a staticmethod gate split": (
        [('    """Extra credit: one step of a GRU, gates in the order r, z, n."""\n\n'
          "    def __init__(self, input_size, hidden_size):\n",
          '    """Extra credit: one step of a GRU, gates in the order r, z, n."""\n\n    N_GATES = 3\n\n'
          "    @staticmethod\n    def gates(y):\n        return y.chunk(GRUCell.N_GATES, dim=-1)\n\n"
          "    def __init__(self, input_size, hidden_size):\n"),
         ("        x_r, x_z, x_n = (x @ self.weight_ih.T + self.bias_ih).chunk(3, dim=-1)\n"
          "        h_r, h_z, h_n = (h @ self.weight_hh.T + self.bias_hh).chunk(3, dim=-1)\n",
          "        x_r, x_z, x_n = self.gates(x @ self.weight_ih.T + self.bias_ih)\n"
          "        h_r, h_z, h_n = self.gates(h @ self.weight_hh.T + self.bias_hh)\n")],
        {"2"}),
    "extra_repr on the GRU layer; torch.lerp for the update": (
        [("        return (1 - z) * n + z * h\n",
          "        return torch.lerp(n, h, z)\n"),
         ("        self.cell = GRUCell(input_size, hidden_size)\n\n",
          "        self.cell = GRUCell(input_size, hidden_size)\n\n    def extra_repr(self) -> str:\n"
          '        return f"{self.cell.input_size=}, {self.cell.hidden_size=}"\n\n')],
        {"2"}),
    "lm_loss with ignore_index and flatten": (
        [('    losses = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none")\n'
          "    if pad_id is None:\n        return losses.mean()\n"
          "    keep = (targets.reshape(-1) != pad_id).to(losses.dtype)\n"
          "    return (losses * keep).sum() / keep.sum()\n",
          "    logits, targets = logits.flatten(0, 1), targets.flatten()\n    if pad_id is None:\n"
          "        return F.cross_entropy(logits, targets)\n"
          "    return F.nll_loss(F.log_softmax(logits, dim=-1), targets, ignore_index=pad_id)\n")],
        {"3"}),
    "a staticmethod and a read-only property on RNNLM": (
        [("        self.proj = nn.Linear(hidden_size, vocab_size)\n        if tie_weights:\n",
          "        self.proj = nn.Linear(hidden_size, vocab_size)\n        if self.tied_by_request(tie_weights):\n"),
         ("    def forward(self, tokens, state=None):\n"
          '        """tokens: (B, T) int64 -> (logits (B, T, vocab_size), final state',
          "    @staticmethod\n    def tied_by_request(flag: bool) -> bool:\n        return bool(flag)\n\n"
          "    @property\n    def tied(self) -> bool:\n        return self.proj.weight is self.embedding.weight\n\n"
          "    def forward(self, tokens, state=None):\n"
          '        """tokens: (B, T) int64 -> (logits (B, T, vocab_size), final state')],
        {"3"}),
    "narrow and view in batchify; slice objects in get_chunk": (
        [("    L = stream.size(0) // batch_size\n    return stream[: batch_size * L].reshape(batch_size, L).clone()\n",
          "    L = stream.size(0) // batch_size\n"
          "    return stream.narrow(0, 0, batch_size * L).view(batch_size, L).clone()\n"),
         ("    n = min(bptt, data.size(1) - 1 - i)\n    return data[:, i:i + n], data[:, i + 1:i + 1 + n]\n",
          "    n = min(bptt, data.size(1) - 1 - i)\n    inputs, targets = slice(i, i + n), slice(i + 1, i + 1 + n)\n"
          "    return data[:, inputs], data[:, targets]\n")],
        {"4"}),
    "match with class patterns (torch.Tensor(), tuple()) in detach_state": (
        [("    if state is None:\n        return None\n    if isinstance(state, torch.Tensor):\n"
          "        return state.detach()\n    return tuple(detach_state(s) for s in state)\n",
          "    match state:\n        case None:\n            return None\n        case torch.Tensor():\n"
          "            return state.detach()\n        case tuple() | list():\n"
          "            return tuple(detach_state(s) for s in state)\n        case _:\n"
          '            raise TypeError(f"not a state: {type(state).__name__}")\n')],
        {"4"}),
    "torch.no_grad() as a decorator and torch.linalg.vector_norm in clip_grad_norm": (
        [("    grads = [p.grad for p in parameters if p.grad is not None]\n    if not grads:\n        return 0.0\n"
          "    total = torch.sqrt(sum((g.detach() ** 2).sum() for g in grads))\n",
          "    grads = [p.grad for p in parameters if p.grad is not None]\n    if not grads:\n        return 0.0\n"
          "    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))\n"),
         ("def clip_grad_norm(parameters, max_norm):\n",
          "@torch.no_grad()\ndef clip_grad_norm(parameters, max_norm):\n")],
        {"4"}),
    "a global step counter, optimizer.zero_grad(set_to_none=True), float(loss.detach())": (
        [("        optimizer.zero_grad()\n        loss.backward()\n        clip_grad_norm(model.parameters(), clip)\n"
          "        optimizer.step()\n        losses.append(loss.item())\n        i += bptt\n    return losses\n",
          "        optimizer.zero_grad(set_to_none=True)\n        loss.backward()\n"
          "        clip_grad_norm(model.parameters(), clip)\n        optimizer.step()\n"
          "        losses.append(float(loss.detach()))\n        i += bptt\n    global STEPS_TAKEN\n"
          "    STEPS_TAKEN += steps\n    return losses\n"),
         ("def train_lm(model, stream, *, steps, lr, batch_size, bptt, clip):\n",
          "STEPS_TAKEN = 0\n\n\ndef train_lm(model, stream, *, steps, lr, batch_size, bptt, clip):\n")],
        {"4"}),
    "torch.autograd.grad with a generator of the states": (
        [("        grads = torch.autograd.grad(hs[-1].sum(), hs)\n    return torch.stack([g.norm() for g in grads])\n",
          "        grads = torch.autograd.grad(outputs=hs[-1].sum(), inputs=hs)\n"
          "    return torch.stack(tuple(torch.linalg.vector_norm(g) for g in grads))\n")],
        {"5"}),
    "heapq.nlargest for the beam": (
        [("            candidates.sort(key=lambda c: -c[1])\n            beam = []\n"
          "            for tokens, logprob, st in candidates[:beam_size]:\n",
          "            beam = []\n"
          "            for tokens, logprob, st in heapq.nlargest(beam_size, candidates, key=lambda c: c[1]):\n"),
         ("def beam_search(model, prefix, beam_size, max_len, eos_id, alpha=1.0):",
          "import heapq\n\n\ndef beam_search(model, prefix, beam_size, max_len, eos_id, alpha=1.0):")],
        {"6"}),
    "@torch.no_grad() on greedy_decode and .item() for the token": (
        [("    device = model_device(model)  # a model on a GPU needs its tokens there\n    with torch.no_grad():\n"
          "        logits, state = model(torch.tensor([prefix], device=device), None)\n        out = []\n"
          "        for _ in range(max_len):\n            token = int(logits[0, -1].argmax())\n"
          "            out.append(token)\n            if token == eos_id:\n                break\n"
          "            logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n",
          "    device = model_device(model)\n    logits, state = model(torch.tensor([prefix], device=device), None)\n"
          "    out: list[int] = []\n    while len(out) < max_len:\n        token = logits[0, -1].argmax().item()\n"
          "        out.append(token)\n        if token == eos_id:\n            break\n"
          "        logits, state = model(torch.tensor([[token]], device=device), state)\n    return out\n"),
         ("def greedy_decode(model, prefix, max_len, eos_id):\n",
          "@torch.no_grad()\ndef greedy_decode(model, prefix, max_len, eos_id):\n")],
        {"6"}),
    "bmm for the additive attention's context and a local named attn_weights": (
        [("        weights = torch.softmax(scores, dim=-1)  # (B, S)\n"
          '        context = torch.einsum("bs,bsh->bh", weights, keys)  # (B, Hk)\n        return context, weights\n',
          "        attn_weights = F.softmax(scores, dim=-1)  # (B, S)\n"
          "        return torch.bmm(attn_weights.unsqueeze(1), keys).squeeze(1), attn_weights\n")],
        {"8"}),
    "itertools.takewhile to cut at </s>": (
        [("    return [row[:row.index(EOS)] if EOS in row else row for row in out]\n",
          "    return [list(itertools.takewhile(lambda t: t != EOS, row)) for row in out]\n"),
         ("def greedy_translate(model, src, max_len):\n",
          "import itertools\n\n\ndef greedy_translate(model, src, max_len):\n")],
        {"8"}),
}

TRANSFORMER_MORE = {
    "var(correction=0) and Optional[nn.Parameter] hints": (
        [("        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n"
          "        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased\n",
          "        mean = x.mean(dim=-1, keepdim=True)\n        var = x.var(dim=-1, correction=0, keepdim=True)\n"),
         ("        self.bias = nn.Parameter(torch.zeros(d)) if bias else None\n",
          "        self.bias: Optional[nn.Parameter] = nn.Parameter(torch.zeros(d)) if bias else None\n"),
         ("class LayerNorm(nn.Module):\n",
          "from typing import Optional\n\n\nclass LayerNorm(nn.Module):\n")],
        {"1"}),
    "a chained pow/mean/add/rsqrt and an extra_repr on RMSNorm": (
        [("        return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight\n",
          "        return x * x.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt() * self.weight\n\n"
          '    def extra_repr(self):\n        return f"{self.weight.numel()}, eps={self.eps}"\n')],
        {"1"}),
    "an exact GELU written with torch.erf": (
        [("        return self.proj(F.gelu(self.fc(x)))\n",
          "        h = self.fc(x)\n        return self.proj(0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0))))\n"),
         ("class MLP(nn.Module):\n",
          "import math\n\n\nclass MLP(nn.Module):\n")],
        {"2"}),
    "a staticmethod silu": (
        [("        return self.down(F.silu(self.gate(x)) * self.up(x))\n",
          "        return self.down(self.silu(self.gate(x)) * self.up(x))\n\n    @staticmethod\n    def silu(a):\n"
          "        return a * torch.sigmoid(a)\n")],
        {"2"}),
    "torch.outer for the RoPE angles": (
        [("    angle = positions.to(x.dtype)[:, None] * theta  # (T, d/2)\n"
          "    cos, sin = torch.cos(angle), torch.sin(angle)\n",
          "    angle = torch.outer(positions.to(x.dtype), theta)\n    cos, sin = angle.cos(), angle.sin()\n")],
        {"3"}),
    "a TypeAlias for the cache, F.softmax and torch.cat with a tuple": (
        [("            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)  # (B, h, "
          "T_past + T, d_head)\n",
          "            past_k, past_v = cache\n"
          "            k, v = torch.cat((past_k, k), 2), torch.cat((past_v, v), 2)\n"),
         ("        out = torch.softmax(scores, dim=-1) @ v  # (B, h, T, d_head)\n",
          "        out = F.softmax(scores, dim=-1) @ v  # (B, h, T, d_head)\n"),
         ("    def forward(self, x, context=None, causal=False, cache=None):\n",
          "    def forward(self, x, context=None, causal=False, cache: KVCache | None = None):\n"),
         ("class MultiHeadAttention(nn.Module):\n",
          "import torch.nn.functional as F\nfrom typing import TypeAlias\n\n"
          "KVCache: TypeAlias = tuple[torch.Tensor, torch.Tensor]\n\n\nclass MultiHeadAttention(nn.Module):\n")],
        {"3", "7"}),
    "match with class patterns on nn.Linear and nn.Embedding in small_init": (
        [("    if isinstance(module, (nn.Linear, nn.Embedding)):\n"
          "        nn.init.normal_(module.weight, mean=0.0, std=0.02)\n"
          "    if isinstance(module, nn.Linear) and module.bias is not None:\n        nn.init.zeros_(module.bias)\n",
          "    match module:\n        case nn.Linear(bias=bias):\n"
          "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n            if bias is not None:\n"
          "                nn.init.zeros_(bias)\n        case nn.Embedding():\n"
          "            nn.init.normal_(module.weight, mean=0.0, std=0.02)\n        case _:\n            pass\n")],
        {"4"}),
    "a ModuleList from a generator and super(TransformerLM, self)": (
        [("                 tie_weights=True, bias=True, post_norm=False):\n        super().__init__()\n"
          '        assert positions in ("learned", "rope")\n',
          "                 tie_weights=True, bias=True, post_norm=False):\n"
          "        super(TransformerLM, self).__init__()\n"
          '        assert positions in ("learned", "rope"), f"unknown positions {positions!r}"\n'),
         ("        self.blocks = nn.ModuleList([Block(d_model, n_heads, d_ff, bias=bias, post_norm=post_norm,\n"
          '                                           rope=positions == "rope") for _ in range(n_layers)])\n',
          "        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_ff, bias=bias, post_norm=post_norm,\n"
          '                                          rope=positions == "rope") for _ in range(n_layers))\n')],
        {"4"}),
    "a dataclass of the parameter counts with field(default_factory=...)": (
        [("    norm = d_model * (2 if bias else 1)\n"
          "    attention = 4 * d_model * d_model + (4 * d_model if bias else 0)\n"
          "    mlp = 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)\n"
          "    total = vocab_size * d_model + n_layers * (attention + mlp + 2 * norm) + norm\n"
          '    total += max_len * d_model if positions == "learned" else 0\n'
          "    total += 0 if tie_weights else vocab_size * d_model\n    return total\n",
          "    norm = d_model * (2 if bias else 1)\n    counts = Counts()\n"
          '    counts.parts["attention"] = 4 * d_model * d_model + (4 * d_model if bias else 0)\n'
          '    counts.parts["mlp"] = 2 * d_model * d_ff + ((d_ff + d_model) if bias else 0)\n'
          "    per_layer = counts.total() + 2 * norm\n"
          "    total = vocab_size * d_model + n_layers * per_layer + norm\n"
          '    total += max_len * d_model if positions == "learned" else 0\n'
          "    total += 0 if tie_weights else vocab_size * d_model\n    return total\n\n\n@dataclass\nclass Counts:\n"
          "    parts: dict[str, int] = field(default_factory=dict)\n\n    def total(self) -> int:\n"
          "        return sum(self.parts.values())\n"),
         ("def param_count(vocab_size,",
          "from dataclasses import dataclass, field\n\n\ndef param_count(vocab_size,")],
        {"4"}),
    "torch.lerp and square in adamw_step": (
        [("    m = beta1 * m + (1 - beta1) * grad\n    v = beta2 * v + (1 - beta2) * grad * grad\n",
          "    m = torch.lerp(m, grad, 1 - beta1)\n    v = v * beta2 + (1 - beta2) * grad.square()\n")],
        {"5"}),
    "AdamW state by new_zeros from a generator; a with torch.no_grad() block": (
        [("        self.m = [torch.zeros_like(p) for p in self.params]\n"
          "        self.v = [torch.zeros_like(p) for p in self.params]\n",
          "        self.m, self.v = ([p.new_zeros(p.shape) for p in self.params] for _ in range(2))\n"),
         ("    @torch.no_grad()\n    def step(self, lr=None):\n",
          "    def step(self, lr=None):\n"),
         ("            new, self.m[i], self.v[i] = adamw_step(p, p.grad, self.m[i], self.v[i], self.t, lr, "
          "self.betas,\n                                                   self.eps, self.weight_decay)\n"
          "            p.copy_(new)\n",
          "            with torch.no_grad():\n"
          "                new, self.m[i], self.v[i] = adamw_step(p, p.grad, self.m[i], self.v[i], self.t, "
          "lr, self.betas,\n                                                       self.eps, self.weight_decay)\n"
          "                p.copy_(new)\n")],
        {"5"}),
    "math.tau in the cosine schedule and a match on the phase": (
        [("    if step < warmup_steps:\n        return max_lr * (step + 1) / warmup_steps\n"
          "    if step >= total_steps:\n        return min_lr\n",
          "    match step:\n        case _ if step < warmup_steps:\n"
          "            return max_lr * (step + 1) / warmup_steps\n        case _ if step >= total_steps:\n"
          "            return min_lr\n"),
         ("    return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * progress)) / 2\n",
          "    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.tau * progress / 2))\n")],
        {"5"}),
    "one crop of block_size + 1 sliced into x and y; isinstance via match": (
        [("    if isinstance(generator, int):\n        generator = torch.Generator().manual_seed(generator)\n",
          "    match generator:\n        case int(seed):\n"
          "            generator = torch.Generator().manual_seed(seed)\n"),
         ("    x = torch.stack([data[s:s + block_size] for s in starts.tolist()])\n"
          "    y = torch.stack([data[s + 1:s + block_size + 1] for s in starts.tolist()])\n",
          "    crops = torch.stack([data[s:s + block_size + 1] for s in starts.tolist()])  # (B, block_size + 1)\n"
          "    x, y = crops[:, :-1], crops[:, 1:]\n")],
        {"5"}),
    "torch.where for top-k, a division by temperature with div": (
        [("    logits = logits / temperature\n    if top_k is not None:\n"
          "        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]  # (..., 1)\n"
          '        logits = logits.masked_fill(logits < kth, float("-inf"))\n',
          "    logits = logits.div(temperature)\n    if top_k is not None:\n"
          "        values, _ = logits.topk(min(top_k, logits.size(-1)), dim=-1)\n"
          "        logits = torch.where(logits < values[..., -1:], torch.full_like(logits, -math.inf), logits)\n"),
         ("def filter_logits(logits,",
          "import math\n\n\ndef filter_logits(logits,")],
        {"7"}),
    "new_full for the BOS column in the Seq2Seq greedy decode": (
        [("    out = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)\n",
          "    out = src.new_full((src.size(0), 1), fill_value=bos, dtype=torch.long)\n")],
        {"8"}),
}

STYLES = {"attention": ATTENTION, "ngram": NGRAM, "backprop": BACKPROP, "rnn_lm": RNN_LM, "transformer": TRANSFORMER}
MORE_STYLES = {"attention": ATTENTION_MORE, "ngram": NGRAM_MORE, "backprop": BACKPROP_MORE, "rnn_lm": RNN_LM_MORE,
               "transformer": TRANSFORMER_MORE}
CORPORA = {"styles": STYLES, "more styles": MORE_STYLES}


def _every_style():
    for corpus, styles in CORPORA.items():
        for assignment_id, table in styles.items():
            for name in table:
                yield pytest.param(corpus, assignment_id, name, id=f"{assignment_id}: {name}")


def _every_table():
    for corpus, styles in CORPORA.items():
        for assignment_id in sorted(styles):
            yield pytest.param(corpus, assignment_id, id=f"{corpus}: {assignment_id}")


def test_the_corpus_covers_every_assignment_with_forty_styles_or_more():
    for styles in CORPORA.values():
        assert set(styles) == {a.id for a in assignments.available()}
    assert sum(len(table) for table in STYLES.values()) >= 40
    assert sum(len(table) for table in MORE_STYLES.values()) >= 60


@pytest.mark.parametrize("corpus, assignment_id", list(_every_table()))
def test_the_styles_of_an_assignment_edit_different_code(corpus, assignment_id):
    """They are graded together, so each edit must still find its text after the others."""
    edits = [edit for replacements, _ in CORPORA[corpus][assignment_id].values() for edit in replacements]
    compile(edited_solution(assignment_id, edits), "submission", "exec")  # each old text found exactly once


@pytest.mark.parametrize("corpus, assignment_id, name", list(_every_style()))
def test_each_style_is_inside_the_subset_and_reaches_no_banned_routine(corpus, assignment_id, name):
    assignment = assignments.get(assignment_id)
    edits, _ = CORPORA[corpus][assignment_id][name]
    text = edited_solution(assignment_id, edits)
    cells = [Cell(index=0, number=1, source=text)]
    assert policy.refused(cells, assignment) == {}
    assert forbidden.tainted_names(cells, assignment.forbidden) == {}
    assert policy.loadable(cells, assignment) == cells  # nothing is left out when the cells load


@pytest.mark.parametrize("corpus, assignment_id", list(_every_table()))
def test_the_styles_of_an_assignment_together_keep_full_marks(tmp_path, corpus, assignment_id):
    table = CORPORA[corpus][assignment_id]
    edits = [edit for replacements, _ in table.values() for edit in replacements]
    questions = set().union(*(questions for _, questions in table.values()))
    path = tmp_path / "submission.py"
    path.write_text(edited_solution(assignment_id, edits))
    report = runner.grade(path, assignments.get(assignment_id), device="cpu", questions=questions)
    assert {r.question for r in report.results} == questions
    assert {r.name: r.output for r in report.results if not r.passed} == {}
    assert not [note for note in report.notes if note.startswith("Not run")]
