"""The grader's clock counts a worker's CPU by its cgroups where it has them: what a process tree
walk cannot see (a process that ended unwaited, one that hid) still spends the call's budget."""
import subprocess
import sys

import pytest

from autograder.sandbox.clock import Clock, WorkerFailure
from autograder.sandbox.linux import WALKS_TREES
from autograder.sandbox.cgroups import cgroup_cpu

pytestmark = pytest.mark.skipif(not WALKS_TREES, reason="the clock counts CPU where it can read /proc")


def test_cgroup_cpu_reads_v1_and_v2_and_takes_the_largest(tmp_path):
    v1, v2, empty = tmp_path / "v1", tmp_path / "v2", tmp_path / "empty"
    for folder in (v1, v2, empty):
        folder.mkdir()
    (v1 / "cpuacct.usage").write_text("2500000000\n")  # nanoseconds
    (v2 / "cpu.stat").write_text("usage_usec 4000000\nuser_usec 3000000\nsystem_usec 1000000\n")
    (empty / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\n")  # v1's cpu controller: no usage here
    assert cgroup_cpu([v1]) == 2.5 and cgroup_cpu([v2]) == 4.0
    assert cgroup_cpu([v1, v2, empty]) == 4.0
    assert cgroup_cpu([empty]) is None and cgroup_cpu([tmp_path / "gone"]) is None


def test_cpu_counted_only_by_the_cgroup_ends_the_call(tmp_path):
    """A sleeping worker whose cgroup says it has burnt 3 s (orphans that already ended) is over a 2 s budget."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    group = tmp_path / "worker"
    group.mkdir()
    (group / "cpuacct.usage").write_text("0")
    try:
        clock = Clock(sleeper.pid, cpu=2.0, wall=60.0, cgroups=[group])
        clock._last_check = 0.0
        assert clock.left() > 0  # nothing used yet
        (group / "cpuacct.usage").write_text(str(3 * 10**9))
        clock._last_check = 0.0
        with pytest.raises(WorkerFailure, match="used 3.0 s of CPU time"):
            clock.left()
        without = Clock(sleeper.pid, cpu=2.0, wall=60.0)  # the tree walk alone sees a sleeping process
        without._last_check = 0.0
        assert without.left() > 0
    finally:
        sleeper.kill()
        sleeper.wait()
