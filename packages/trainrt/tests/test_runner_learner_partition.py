"""``training.learner_sms``: the learner held to part of the GPU, or why it is not (CPU side; the GPU side is in
``test_algos_graph.py``)."""

import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.learner_partition import LearnerPartition
from trainrt.runner.schedule import IterationSchedule


def test_the_setting_is_a_positive_count_or_none():
    cfg = cpu_demo_preset("sac", "g1_walk_rough", "mujoco")
    assert cfg.training.learner_sms is None  # by default the learner shares the whole GPU
    assert apply_overrides(cfg, ["training.learner_sms=66"]).training.learner_sms == 66
    with pytest.raises(ValueError, match="learner_sms"):
        apply_overrides(cfg, ["training.learner_sms=0"])


@pytest.mark.parametrize(
    ("requested", "overlap", "reason"),
    [
        (None, True, "not requested"),
        (66, True, "cpu device"),
        (66, False, "cpu device"),
    ],
)
def test_without_a_gpu_there_is_no_partition_and_the_summary_says_why(requested, overlap, reason):
    partition = LearnerPartition(requested, torch.device("cpu"), overlap=overlap)
    assert partition.stream is None and partition.fallback_reason == reason
    assert partition.diagnostics() == {
        "learner_sms": requested,
        "learner_partitioned": False,
        "learner_partition_fallback_reason": reason,
    }


def test_the_schedule_reports_the_partition_with_its_own_facts():
    class Stub:  # the parts a sequential CPU schedule asks for at construction
        device = torch.device("cpu")
        capacity_per_env = 8

    partition = LearnerPartition(66, torch.device("cpu"), overlap=True)
    schedule = IterationSchedule(
        Stub(), Stub(), Stub(), steps_per_iteration=2, updates_per_iteration=1, overlap=False,
        learner_partition=partition,
    )  # fmt: skip
    facts = schedule.diagnostics()
    assert facts["learner_sms"] == 66 and facts["learner_partitioned"] is False
    assert facts["learner_partition_fallback_reason"] == "cpu device"
    plain = IterationSchedule(
        Stub(), Stub(), Stub(), steps_per_iteration=2, updates_per_iteration=1, overlap=False
    )
    assert "learner_sms" not in plain.diagnostics()


def test_a_run_asked_for_a_partition_says_in_its_console_and_summary_why_it_has_none(tmp_path):
    from test_runner_train import tiny_config

    from trainrt.runner import OffPolicyRunner

    lines = []
    quiet = ["training.final_eval=false", "training.export_onnx=false", "training.tensorboard=false"]
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", *quiet, "training.learner_sms=66", "training.overlap=true"
    )
    summary = OffPolicyRunner(cfg, log=lines.append).run()
    (line,) = [line for line in lines if line.startswith("warm-up done")]
    assert line.endswith(", learner on the whole GPU (cpu device)"), line
    facts = summary.learner_graph
    assert (facts["learner_sms"], facts["learner_partitioned"]) == (66, False)
    assert facts["learner_partition_fallback_reason"] == "cpu device"
