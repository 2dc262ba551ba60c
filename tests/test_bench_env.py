"""The benches that set OMP_WAIT_POLICY must do it before torch loads OpenMP, which reads it only then:
importing them must not import torch (bench realtime once did, and ran with spinning threads while it
printed PASSIVE)."""

from __future__ import annotations

import subprocess
import sys

import pytest

SETS_THE_POLICY = ["bench.generate", "bench.realtime", "bench.app", "bench.train",
                   "bench.prep"]


@pytest.mark.parametrize("module", SETS_THE_POLICY)
def test_importing_a_bench_sets_the_policy_before_torch_loads(module):
    code = (f"import os, sys; import {module}; "
            "print('torch' in sys.modules, os.environ.get('OMP_WAIT_POLICY'))")
    env = {"PATH": "/usr/bin:/bin"}  # no OMP_WAIT_POLICY of our own
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    torch_loaded, policy = out.stdout.split()
    if module == "bench.train":  # sets it in main(), right before its own `import torch`
        assert torch_loaded == "False"
        return
    assert (torch_loaded, policy) == ("False", "PASSIVE")
