"""`benchmarks/norm_kernel.py` on the CPU: the layer tails run in Triton's interpreter under every geometry
asked for, the results land in JSON, and bad input is refused with the fix."""

import json
import os
import subprocess
import sys

import pytest
import torch
from benchmark_scripts import BENCHMARKS, load

SCRIPT = BENCHMARKS / "norm_kernel.py"
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU smoke-test path")


def _run(*args, interpret=True):
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@cpu_only
def test_every_layer_is_timed_under_every_geometry(tmp_path):
    out = tmp_path / "norm.json"
    result = _run("--rows=16", "--repeats=1", "--geometries=8192x256,4096x512x2048x2", f"--out={out}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert (
        data["diagnostic"]
        and data["rows"] == 16
        and data["geometries"] == ["8192x256x4096x1", "4096x512x2048x2"]
    )
    layers = data["layers_forward_and_forward_backward_us"]
    assert list(layers) == [
        "critic 2x16x768", "critic 2x16x384", "critic 2x16x192", "actor 1x16x512", "actor 1x16x256", "actor 1x16x128",
    ]  # fmt: skip
    for arms in layers.values():
        assert list(arms) == ["eager", "kernel 8192x256x4096x1", "kernel 4096x512x2048x2"]
        assert all(len(t) == 2 and min(t) > 0 for t in arms.values())
    assert data["critic_network_forward_backward_us"] is None  # the network needs CUDA


def test_the_geometry_is_restored_after_each_arm():
    from trainrt.algos import fused_norm

    script = load("norm_kernel")

    def constants():
        return tuple(getattr(fused_norm, name) for name in script._CONSTANTS)

    before = constants()
    with script.launch_geometry((1024, 64, 512, 2)):
        assert constants() == (1024, 64, 512, 2)
    assert constants() == before


@pytest.mark.slow
@pytest.mark.parametrize("geometries", ["8192", "8192x0", "axb", "1x2x3x4x5", ""])
def test_a_bad_geometry_is_refused_with_an_example(geometries):
    result = _run(f"--geometries={geometries}")
    assert result.returncode == 2 and "(e.g. --geometries 8192x256x4096x1)" in result.stderr


@cpu_only
def test_without_cuda_or_the_interpreter_it_says_what_to_set():
    result = _run("--rows=4", interpret=False)
    assert result.returncode == 2 and "TRITON_INTERPRET=1" in result.stderr
