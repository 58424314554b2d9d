"""Auto-reset: only done rows change, final observations are pre-reset, post-reset observations are fresh."""

from __future__ import annotations

import torch
from managers_toy_scene import make_env, row_fails_at, time_out, toy_cfg

from trainrt.managers import TerminationTermCfg

FAILING_ROW = 1


def _env_with_failure():
    terminations = {
        "time_out": TerminationTermCfg(time_out, time_out=True),
        "fail": TerminationTermCfg(row_fails_at, params={"row": FAILING_ROW, "step": 3}),
    }
    env = make_env(toy_cfg(terminations=terminations, episode_length_s=1.0))
    physics: dict[str, torch.Tensor] = {}
    backend_step = env.backend.step

    def step_and_record():
        backend_step()
        physics["qpos"] = env.backend.qpos.clone()
        physics["qvel"] = env.backend.qvel.clone()

    env.backend.step = step_and_record
    return env, physics


def _step_until_failure(env):
    env.reset()
    g = torch.Generator().manual_seed(3)
    for _ in range(3):
        action = torch.rand(env.num_envs, env.num_actions, generator=g) * 2 - 1
        result = env.step(action)
    return result, action


def test_only_done_rows_change():
    env, physics = _env_with_failure()
    result, _ = _step_until_failure(env)
    done = result.terminated | result.truncated
    assert done.tolist() == [row == FAILING_ROW for row in range(env.num_envs)]
    keep = ~done
    assert torch.equal(env.backend.qpos[keep], physics["qpos"][keep])
    assert torch.equal(env.backend.qvel[keep], physics["qvel"][keep])
    assert env.episode_length_buf.tolist() == [3 if row != FAILING_ROW else 0 for row in range(env.num_envs)]
    # the failed row took the reset payload: default height, zero velocity, joints near default
    torch.testing.assert_close(env.backend.qpos[FAILING_ROW], env.reset_payload["qpos"][FAILING_ROW])
    assert env.backend.qpos[FAILING_ROW, 2].item() == 0.5
    assert torch.all(env.backend.qvel[FAILING_ROW] == 0)
    joints = env.robot.joint_pos[FAILING_ROW] - env.robot.default_joint_pos[FAILING_ROW]
    assert torch.all(joints.abs() <= 0.2 + 1e-6)


def test_final_observation_is_pre_reset_and_observation_is_post_reset():
    env, physics = _env_with_failure()
    result, action = _step_until_failure(env)
    row = FAILING_ROW
    default = env.robot.default_joint_pos[row]
    # critic = [root pos (3), root lin vel (3), joint pos rel (2)] without noise
    pre = physics["qpos"][row].to(torch.float32), physics["qvel"][row].to(torch.float32)
    expected_final = torch.cat((pre[0][:3], pre[1][:3], pre[0][7:9] - default))
    torch.testing.assert_close(result.final_obs["critic"][row], expected_final)
    post_qpos = env.backend.qpos[row].to(torch.float32)
    expected_obs = torch.cat((post_qpos[:3], torch.zeros(3), post_qpos[7:9] - default))
    torch.testing.assert_close(result.obs["critic"][row], expected_obs)
    # policy "actions" columns (4:6): the reset row observes a zero action, the others the action taken
    torch.testing.assert_close(result.obs["policy"][row, 4:6], torch.zeros(2))
    torch.testing.assert_close(result.final_obs["policy"][row, 4:6], action[row])
    others = [r for r in range(env.num_envs) if r != row]
    torch.testing.assert_close(result.obs["policy"][others, 4:6], action[others])
    for group in ("policy", "critic"):
        assert torch.equal(result.final_obs[group][others], result.obs[group][others])


def test_env_reset_resets_every_row():
    env = make_env(toy_cfg(episode_length_s=1.0))
    env.reset()
    for _ in range(3):
        env.step(torch.ones(env.num_envs, env.num_actions))
    assert torch.all(env.backend.qvel != 0)
    obs = env.reset()
    assert torch.all(env.episode_length_buf == 0)
    assert torch.all(env.backend.qvel == 0)
    assert torch.all(env.backend.qpos[:, 2] == 0.5)
    assert torch.all(env.action_manager.action == 0)
    torch.testing.assert_close(obs["critic"][:, 3:6], torch.zeros(env.num_envs, 3))
    # root xy comes from the reset event: random per row
    assert env.backend.qpos[:, 0].unique().numel() == env.num_envs


def test_initial_reset_is_not_counted_as_finished_episodes():
    env = make_env()
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert env.episode_stats()["Episode/num_finished"] == 0
