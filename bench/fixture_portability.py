"""How far public fixtures move between CPU kernels, against the staleness bounds and the checks' tolerances.

    .venv/bin/python bench/fixture_portability.py

A second CPU is not needed to see what differs between CPUs: the kernels that differ are chosen at
run time, so each configuration below recomputes every assignment's fixtures in a fresh process
with ATen's vector ISA (`ATEN_CPU_CAPABILITY`) and MKL's code path (`MKL_ENABLE_INSTRUCTIONS`)
forced, the two switches that change float32 results on x86 (ARM machines run NEON kernels, which
differ from these as much as these differ from each other). It prints the largest move of a
float32 value (in float32 ulps of that value) and of a float64 value (as a fraction of its array's
scale), next to `build.py`'s staleness bounds. The loosest tolerance a public check applies to a
recorded value is 1e-5 relative (float32) and 1e-9 absolute (float64); the bounds must lie between.
Nothing is written to the repository.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder.authoring import build  # noqa: E402
from autograder.authoring.assignments import available  # noqa: E402

CONFIGS = {
    "as installed": {},
    "ATen scalar kernels": {"ATEN_CPU_CAPABILITY": "default"},
    "ATen AVX2": {"ATEN_CPU_CAPABILITY": "avx2"},
    "MKL AVX2": {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "MKL SSE4.2 + ATen scalar": {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ATEN_CPU_CAPABILITY": "default"},
    "one thread": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
}

RECORD = """
import json, sys
from autograder.authoring import build
from autograder.authoring.assignments import available
out = {}
for a in available():
    ref = build.module_from_text(f"bench_ref_{a.id}", build.reference_module(a))
    out[a.id] = json.loads(build.public_fixtures(a, ref))
json.dump(out, sys.stdout)
"""


def record(env: dict) -> dict:
    done = subprocess.run([sys.executable, "-c", RECORD], cwd=ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def moves(committed: dict, fresh: dict) -> tuple[float, float]:
    """(largest float32 move in ulps of the value, largest float64 move as a fraction of its array's scale)."""
    ulps, scaled = 0.0, 0.0
    for key, entry in committed.items():
        for a, b in zip(entry["arrays"], fresh[key]["arrays"]):
            if not a["dtype"].lstrip("<>=|").startswith("f"):
                continue
            x, y = build._finite(a["data"]), build._finite(b["data"])
            if a["dtype"].endswith("4"):
                big = np.maximum(np.abs(x), np.abs(y))
                with np.errstate(invalid="ignore", divide="ignore"):
                    ulps = max(ulps, float(np.nanmax(np.where(big > 0, np.abs(x - y) / (big * 2.0 ** -23), 0.0),
                                                     initial=0.0)))
            else:
                scale = float(max(np.abs(x).max(initial=0), np.abs(y).max(initial=0))) or 1.0
                scaled = max(scaled, float(np.abs(x - y).max(initial=0)) / scale)
    return ulps, scaled


def main() -> None:
    committed = {a.id: json.loads(a.fixtures_path.read_text()) for a in available()}
    print(f"bounds: float32 {build.FLOAT32_ULPS / 2.0 ** -23:g} ulps, float64 {build.FLOAT64_SCALE:g} of the scale"
          f" (+{build.FLOAT64_ABS:g} absolute)")
    print(f"{'configuration':<28} {'float32 ulps':>12} {'float64 / scale':>16}  current?")
    for name, env in CONFIGS.items():
        fresh = record(env)
        worst32, worst64 = 0.0, 0.0
        current = True
        for assignment_id, doc in committed.items():
            u, s = moves(doc, fresh[assignment_id])
            worst32, worst64 = max(worst32, u), max(worst64, s)
            current &= build.same_fixtures(json.dumps(doc), json.dumps(fresh[assignment_id]))
        print(f"{name:<28} {worst32:>12.2f} {worst64:>16.2e}  {'yes' if current else 'NO'}")


if __name__ == "__main__":
    main()
