"""The optional Weights & Biases logger, with a stand-in ``wandb`` module: the run's config and id at init,
the same scalars as TensorBoard at the same steps, a clear start-up error without the package; and the
console block of a tiny run whose episodes end."""

import sys
import types

import pytest
from test_runner_train import tiny_config

from trainrt.runner import OffPolicyRunner
from trainrt.runner.manifest import load_resolved_config

SHORT_EPISODES = ["task.episode_length_s=0.06", "training.log_every=1"]  # 3 control steps an episode


class FakeRun:
    def __init__(self, **init):
        self.init = init
        self.logged: list[tuple[dict, int]] = []
        self.finished = 0
        self.exit_codes: list[int] = []

    def log(self, data, step):
        self.logged.append((dict(data), step))

    def finish(self, exit_code=None):
        self.finished += 1
        self.exit_codes.append(exit_code)


@pytest.fixture
def fake_wandb(monkeypatch):
    module = types.ModuleType("wandb")
    module.runs = []

    def init(**kwargs):
        run = FakeRun(**kwargs)
        module.runs.append(run)
        return run

    module.init = init
    monkeypatch.setitem(sys.modules, "wandb", module)
    return module


def test_wandb_gets_the_config_and_the_same_scalars_as_tensorboard(tmp_path, fake_wandb):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run_dir = tmp_path / "run"
    overrides = [
        *SHORT_EPISODES,
        "training.wandb.enabled=true",
        "training.wandb.project=walkers",
        "training.wandb.mode=offline",
        'training.wandb.tags=["cpu", "tiny"]',
    ]
    lines: list[str] = []
    runner = OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *overrides), log=lines.append)
    runner.run()

    (run,) = fake_wandb.runs
    assert run.init["project"] == "walkers" and run.init["entity"] is None
    assert run.init["name"] == "run" and run.init["mode"] == "offline" and run.init["tags"] == ["cpu", "tiny"]
    assert run.init["id"] == runner.run_id and run.init["resume"] == "allow"
    assert "dir" not in run.init and not (run_dir / "wandb").exists()  # W&B's files stay out of the run
    stored = load_resolved_config(run_dir)
    assert stored.training.wandb.enabled and stored.training.wandb.project == "walkers"
    assert run.init["config"] == stored.model_dump(mode="json")
    assert run.finished == 1 and run.exit_codes == [0]

    accumulator = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    tensorboard = {
        (tag, event.step): event.value
        for tag in accumulator.Tags()["scalars"]
        for event in accumulator.Scalars(tag)
    }
    logged = {(tag, step): value for data, step in run.logged for tag, value in data.items()}
    assert set(logged) == set(tensorboard)
    assert {step for _, step in run.logged} == {1, 2}
    for key, value in logged.items():
        assert value == pytest.approx(tensorboard[key], rel=1e-6), key
    assert ("Metrics/lin_vel_error_xy", 2) in logged and ("Loss/critic_loss", 1) in logged

    # the console block of a run whose episodes end: episodes, the task's metrics, why they ended
    text = "\n".join(lines)
    assert "\nepisodes   " in text and " finished  length 3  return " in text
    assert "\nmetrics    lin_vel_error_xy " in text and "\nended by   time_out 100%" in text


def test_wandb_enabled_without_the_package_fails_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    run_dir = tmp_path / "run"
    with pytest.raises(ValueError, match=r"pip install 'trainrt\[wandb\]'"):
        OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", "training.wandb.enabled=true"))
    assert not run_dir.exists()


def test_wandb_is_off_by_default(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    cfg = tiny_config(tmp_path / "run")
    assert cfg.training.wandb.enabled is False
    OffPolicyRunner(cfg)  # no wandb needed


def test_a_run_that_fails_ends_its_wandb_run_with_exit_code_1(tmp_path, fake_wandb, monkeypatch):
    def fail(self):
        raise RuntimeError("the learner broke")

    monkeypatch.setattr(OffPolicyRunner, "_train", fail)
    runner = OffPolicyRunner(
        tiny_config(tmp_path / "run", "sac", "g1_walk_flat", "training.wandb.enabled=true")
    )
    with pytest.raises(RuntimeError, match="the learner broke"):
        runner.run()
    (run,) = fake_wandb.runs
    assert run.exit_codes == [1]  # W&B shows the run as failed, not finished
