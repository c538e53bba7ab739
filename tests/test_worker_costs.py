"""What one grading costs that it need not: imports nobody uses, in the worker and in the CLI.

Each case runs in a fresh interpreter, since the test process has imported most of torch already.
"""
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

# A device probe of a small module, answered by the worker's own `handle` as a forked worker would
# (the simulated device installed first, as the fork server does): the reply must still say where
# the outputs were, and reading the simulated tensors back must not pull in torch's DTensor (and
# sympy with it), 39 MiB and 0.6 s of CPU in every worker.
PROBE = textwrap.dedent("""
    import sys
    import torch
    from autograder.sandbox import simulated_device, wire
    from autograder.sandbox.worker import Worker
    simulated_device.install()
    worker = Worker()
    exec("import torch\\nclass Net(torch.nn.Module):\\n"
         "    def __init__(self):\\n        super().__init__()\\n        self.lin = torch.nn.Linear(3, 2)\\n"
         "    def forward(self, x):\\n        return self.lin(x).relu()\\n", worker.module.__dict__)
    handle = worker.make_handle(worker.module.Net())
    arrays = []
    args = wire.encode([torch.ones(4, 3)], arrays)
    kwargs = wire.encode({}, arrays)
    reply, reply_arrays = worker.handle({"op": "device", "target": {"handle": handle.id}, "dtype": None,
                                         "simulated": sys.argv[1] == "simulated", "device_arg": None, "seed": None,
                                         "move_data": True, "args": args, "kwargs": kwargs}, arrays)
    value = wire.decode(reply["value"], reply_arrays)
    print(reply["event"], value["outputs"].lmgrade_device, sorted(value["states"][0]),
          "torch.distributed.tensor" in sys.modules, "sympy" in sys.modules)
""")


@pytest.mark.parametrize("where", ["simulated", "cpu"])
def test_a_device_probe_reply_keeps_its_device_and_imports_no_dtensor(where):
    out = subprocess.run([sys.executable, "-c", PROBE, where], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    event, device, *rest = out.stdout.split()
    assert (event, device) == ("done", "accel:0" if where == "simulated" else "cpu")
    assert " ".join(rest) == "['lin.bias', 'lin.weight'] False False"


def test_grading_one_submission_loads_neither_the_build_nor_the_batch():
    """`lmgrade grade FILE --json` (Gradescope) imports what grading needs, not nbformat, the batch or shards."""
    code = textwrap.dedent("""
        import sys
        from autograder import cli
        heavy = ("nbformat", "jsonschema", "autograder.authoring.build", "autograder.grading.batch",
                 "autograder.grading.shard", "autograder.grading.report")
        cli.make_parser(bundle=False).parse_args(["grade", "x.ipynb", "--assignment", "ngram", "--json", "r.json"])
        print(sorted(m for m in heavy if m in sys.modules))
        cli.make_parser(bundle=False).parse_args(["grade", "x", "--assignment", "ngram", "--out", "o", "--shard", "0/2"])
        print(sorted(m for m in heavy if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    one, sharded = out.stdout.splitlines()[:2]
    assert one == "[]"
    assert "autograder.grading.shard" in sharded  # a --shard is still read by the shards' own parser
