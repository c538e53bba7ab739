"""Reference results (a perplexity threshold, say), read before any worker starts.

Why a file of its own: these results come from the reference's own runs, too slow to repeat per
submission, so they are cached on disk; since a worker may be able to write that cache, the grader
reads every cached result once, before the first worker starts, and afterwards only writes the
file (`load_reference_results`, `cached_result`, reached through `Context.cached`).
"""
from __future__ import annotations

__all__ = ["reference_result", "load_reference_results", "cached_result"]

_REFERENCE_RESULTS: dict[str, dict] = {}  # cache tag -> {key: JSON value}, per grader process


def reference_result(*keys: str):
    """Register `compute(ref) -> JSON value` under `key` in a check module (with several keys, `compute` returns one
    value for each: the results of one reference run).

    `runner.reference_results(assignment)` (a batch, before its first worker) computes every
    registered result that is not cached yet, so grader processes only read them; `t.cached(key,
    ...)` then returns it from memory. Grading one submission reads what is cached and lets the
    check compute the rest (in the grader, from the reference alone).
    """

    def register(fn):
        fn.lmgrade_reference_result = keys
        return fn

    return register


def load_reference_results(cache_tag: str, ref=None, modules=()) -> dict:
    """Every cached result of one reference version, in memory (read from disk once per process).

    Call before any worker starts. Registered results (`@reference_result`) of `modules` that are
    missing are computed here from `ref`. The dict returned is the process-wide one for the tag.
    """
    import json

    from autograder.data.shakespeare import cache_dir
    results = _REFERENCE_RESULTS.get(cache_tag)
    if results is None:
        results = _REFERENCE_RESULTS[cache_tag] = {}
        folder = cache_dir() / "reference"
        prefix = f"{cache_tag}-"
        if folder.is_dir():
            for path in sorted(folder.glob(f"{prefix}*.json")):
                try:
                    results[path.name[len(prefix):-len(".json")]] = json.loads(path.read_text())
                except (OSError, ValueError, RecursionError):
                    continue  # unreadable or broken: computed again when needed
    if ref is not None:
        for module in modules:
            for fn in list(vars(module).values()):
                keys = getattr(fn, "lmgrade_reference_result", None)
                if isinstance(keys, tuple) and not all(key in results for key in keys):
                    values = fn(ref)
                    for key, value in zip(keys, values if len(keys) > 1 else (values,)):
                        results[key] = _copy(value)
                        _write_reference_result(cache_tag, key, value)
    return results


def cached_result(cache_tag: str, results: dict | None, key: str, compute):
    """`Context.cached`'s work: the result under `key` from `results` (read before the worker started),
    else from this process's results for the tag; a missing one is computed now, kept and written."""
    if results is None:
        results = _REFERENCE_RESULTS.setdefault(cache_tag, {})
    if key in results:
        return _copy(results[key])
    value = compute()
    results[key] = _copy(value)
    _write_reference_result(cache_tag, key, value)
    return value


def _copy(value):
    """A fresh copy of a JSON value, so no check can change what the next one reads."""
    import json
    return json.loads(json.dumps(value))


def _write_reference_result(cache_tag: str, key: str, value) -> None:
    import json
    import os
    import tempfile

    from autograder.data.shakespeare import cache_dir
    path = cache_dir() / "reference" / f"{cache_tag}-{key}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent)
        with os.fdopen(fd, "w") as f:
            json.dump(value, f)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache costs time in the next process, nothing else
