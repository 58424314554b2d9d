"""Metrics averaged per episode, curriculum state publication, null managers for empty groups."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from managers_toy_scene import episode_step, make_env, row_index, toy_cfg

from trainrt.managers import (
    CurriculumTermCfg,
    ManagerTermBase,
    MetricTermCfg,
    NullCurriculumManager,
    NullMetricsManager,
)


def _episode_step_flat(env):
    return episode_step(env)[:, 0]


def test_metrics_are_episode_means_averaged_over_finished_episodes():
    metrics = {"rows": MetricTermCfg(row_index), "t": MetricTermCfg(_episode_step_flat)}
    env = make_env(toy_cfg(metrics=metrics))
    env.reset()
    for _ in range(env.max_episode_length):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    stats = env.episode_stats()
    assert stats["Metrics/rows"] == pytest.approx(sum(range(env.num_envs)) / env.num_envs)
    # the metric sees episode lengths 1..T within an episode: mean (T + 1) / 2
    assert stats["Metrics/t"] == pytest.approx((env.max_episode_length + 1) / 2)
    assert torch.all(env.metrics_manager.episode_sums == 0)
    assert "rows" in str(env.metrics_manager)


class _CountResets(ManagerTermBase):
    PARAMS: ClassVar[dict[str, float]] = {"step": 1.0}

    def __init__(self, cfg, env):
        super().__init__(cfg, env)
        self.total = torch.zeros((), device=env.device)
        self.step = float(self.params["step"])

    def __call__(self, env, env_mask):
        self.total += env_mask.sum() * self.step
        return {"resets": self.total, "level": self.total / 4}


def test_curriculum_runs_in_the_reset_path_and_publishes_state():
    env = make_env(toy_cfg(curriculum={"count": CurriculumTermCfg(_CountResets, params={"step": 1.0})}))
    env.reset()  # 4 rows reset
    for _ in range(env.max_episode_length):
        env.step(torch.zeros(env.num_envs, env.num_actions))  # 4 more at the time-out
    stats = env.episode_stats()
    assert stats["Curriculum/count/resets"] == 8.0
    assert stats["Curriculum/count/level"] == 2.0


def test_empty_groups_get_null_managers():
    env = make_env(toy_cfg(metrics={}, curriculum={}))
    assert isinstance(env.metrics_manager, NullMetricsManager)
    assert isinstance(env.curriculum_manager, NullCurriculumManager)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    stats = env.episode_stats()
    assert not any(k.startswith(("Metrics/", "Curriculum/")) for k in stats)
    text = str(env)
    assert "NullMetricsManager" in text and "NullCurriculumManager" in text


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ("actions", "action term 'bad' must be an ActionTermCfg"),
        ("commands", "command term 'bad' must be a CommandTermCfg"),
        ("events", "event term 'bad' must be an EventTermCfg"),
        ("rewards", "reward term 'bad' must be a RewardTermCfg"),
        ("terminations", "termination term 'bad' must be a TerminationTermCfg"),
        ("metrics", "metric term 'bad' must be a MetricTermCfg"),
        ("curriculum", "curriculum term 'bad' must be a CurriculumTermCfg"),
    ],
)
def test_a_term_config_of_the_wrong_type_is_named_with_the_expected_type(group, message):
    with pytest.raises(ValueError, match=message):
        make_env(toy_cfg(**{group: {"bad": {"func": row_index}}}))


def test_function_term_tables_list_index_name_and_function():
    metrics = {"rows": MetricTermCfg(row_index)}
    env = make_env(toy_cfg(metrics=metrics, curriculum={"none": CurriculumTermCfg(_no_state)}))
    for manager, name, func in (
        (env.metrics_manager, "rows", "row_index"),
        (env.curriculum_manager, "none", "_no_state"),
    ):
        lines = str(manager).splitlines()
        assert [cell.strip() for cell in lines[2].strip("|").split("|")] == ["index", "name", "func"]
        assert [cell.strip() for cell in lines[4].strip("|").split("|")] == ["0", name, func]


def _no_state(env, env_mask):
    return None
