"""`benchmarks/sm_partition.py` on the CPU: its settings are checked, and without CUDA it measures nothing and
says so (the measurement itself needs a GPU: docs/perf)."""

import json

import pytest
import torch
from benchmark_scripts import load


def test_the_multiprocessor_counts_parse_and_a_bad_entry_is_named():
    script = load("sm_partition")
    assert script.parse_sm_counts("0, 116,100") == [0, 116, 100]
    with pytest.raises(ValueError, match=r"'ten' is not a whole number"):
        script.parse_sm_counts("0,ten")
    with pytest.raises(ValueError, match="-4"):
        script.parse_sm_counts("-4")


def test_a_bad_count_exits_2_before_measuring(capsys):
    assert load("sm_partition").main(["--heavy-sms", "100,x"]) == 2
    assert "'x' is not a whole number" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="measures on a GPU; this test is the CPU path")
def test_without_cuda_nothing_is_measured_and_the_result_says_why(tmp_path, capsys):
    out = tmp_path / "partition.json"
    assert load("sm_partition").main(["--heavy-sms", "0,100", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["heavy_sms"] == [0, 100] and data["diagnostic"] is True
    assert data["skipped"] == "no CUDA device" and data["settings"] == {}
    assert "needs a CUDA GPU" in capsys.readouterr().out
