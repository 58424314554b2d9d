"""A tiny scene (floating box with two hinged arms) and simple terms for the manager and env tests."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import mujoco
import torch

from trainrt.envs import EnvCfg, ManagerBasedRlEnv, SceneCfg
from trainrt.managers import (
    ActionTermCfg,
    CommandTerm,
    CommandTermCfg,
    EventTerm,
    EventTermCfg,
    GaussianNoiseCfg,
    JointPositionAction,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    TerminationTermCfg,
)
from trainrt.mdp import joint_pos_rel, joint_vel, last_action

TOY_XML = """
<mujoco model="toy">
  <compiler angle="radian"/>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 0.5">
      <freejoint name="root"/>
      <geom name="box" type="box" size="0.1 0.1 0.05" mass="1"/>
      <body name="arm_a" pos="0.1 0 0">
        <joint name="hinge_a" type="hinge" axis="0 1 0" range="-1 1" limited="true" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.2"/>
      </body>
      <body name="arm_b" pos="-0.1 0 0">
        <joint name="hinge_b" type="hinge" axis="1 0 0" range="-1.5 1.5" limited="true" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 -0.2 0 0" size="0.02" mass="0.2"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="servo_a" joint="hinge_a" kp="20" kv="1" forcerange="-3 3" forcelimited="true"/>
    <position name="servo_b" joint="hinge_b" kp="10" kv="0.5" forcerange="-2 2" forcelimited="true"/>
  </actuator>
</mujoco>
"""

NUM_ENVS = 4
DECIMATION = 2  # step_dt = 0.01 s


def toy_model() -> mujoco.MjModel:
    """The toy model (fresh each call)."""
    return mujoco.MjModel.from_xml_string(TOY_XML)


# --- terms -------------------------------------------------------------------------------------------------


def root_state(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Root position and linear velocity (num_envs, 6)."""
    return torch.cat((env.robot.root_pos_w, env.robot.root_lin_vel_w), dim=1)


def episode_step(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Episode length as a float column (num_envs, 1)."""
    return env.episode_length_buf.to(torch.float32).unsqueeze(1)


def row_index(env: ManagerBasedRlEnv) -> torch.Tensor:
    """The row number as float (num_envs,)."""
    return torch.arange(env.num_envs, device=env.device, dtype=torch.float32)


def constant(env: ManagerBasedRlEnv, value: float = 1.0) -> torch.Tensor:
    """A constant (num_envs,)."""
    return torch.full((env.num_envs,), value, device=env.device)


def command_obs(env: ManagerBasedRlEnv, name: str = "target") -> torch.Tensor:
    """A command (num_envs, D)."""
    return env.command_manager.command(name)


def time_out(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Episode reached its length limit (num_envs,) bool."""
    return env.episode_length_buf >= env.max_episode_length


def root_below(env: ManagerBasedRlEnv, height: float = 0.0) -> torch.Tensor:
    """Root lower than ``height`` (num_envs,) bool."""
    return env.robot.root_pos_w[:, 2] < height


def row_fails_at(env: ManagerBasedRlEnv, row: int = 0, step: int = 2) -> torch.Tensor:
    """Row ``row`` fails when its episode reaches ``step`` steps (num_envs,) bool."""
    rows = torch.arange(env.num_envs, device=env.device)
    return (rows == row) & (env.episode_length_buf >= step)


class ResetRootRandom(EventTerm):
    """Reset event: random root xy and joint offsets around default, written into the payload's masked rows."""

    PARAMS: ClassVar[dict[str, Any]] = {"xy_range": 0.5, "joint_range": 0.2}

    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self._draw = torch.zeros(2, env.num_envs, 2, device=env.device)

    def draw_(self, generator: torch.Generator) -> None:
        self._draw.uniform_(-1.0, 1.0, generator=generator)

    def apply(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        qpos = env.reset_payload["qpos"]
        xy = self._draw[0] * self.params["xy_range"]
        dq = self._draw[1] * self.params["joint_range"]
        qpos[:, 0:2] = torch.where(env_mask.unsqueeze(1), xy.to(qpos.dtype), qpos[:, 0:2])
        qpos[:, 7:9] = torch.where(env_mask.unsqueeze(1), qpos[:, 7:9] + dq.to(qpos.dtype), qpos[:, 7:9])


class CountCalls(EventTerm):
    """Stateful event: counts, per row, how often it fired (num_envs,); calls (masks) and draws are recorded
    too (its draw is empty)."""

    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.count = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        self.calls = 0
        self.draws = 0

    def draw_(self, generator: torch.Generator) -> None:
        self.draws += 1

    def apply(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        self.count += env_mask.long()
        self.calls += 1


class UniformTargetCommand(CommandTerm):
    """A 2-D target drawn uniformly in [-1, 1); ``updates`` counts ``_update`` calls."""

    def __init__(self, cfg: CommandTermCfg, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self._command = torch.zeros(env.num_envs, 2, device=env.device)
        self._draw = torch.zeros(env.num_envs, 2, device=env.device)
        self.updates = 0

    @property
    def command(self) -> torch.Tensor:
        """The target (num_envs, 2)."""
        return self._command

    def _draw_(self, generator: torch.Generator) -> None:
        self._draw.uniform_(-1.0, 1.0, generator=generator)

    def _resample_drawn(self, env_mask: torch.Tensor) -> None:
        self._command.copy_(torch.where(env_mask.unsqueeze(1), self._draw, self._command))

    def _update(self) -> None:
        self.updates += 1


# --- configs -----------------------------------------------------------------------------------------------


def toy_scene() -> SceneCfg:
    """The toy scene config."""
    return SceneCfg(
        model_factory=toy_model,
        bodies=("base", "arm_a"),
        init_root_height=0.5,
        default_joint_pos={"hinge_a": 0.3},
    )


def toy_cfg(**overrides: Any) -> EnvCfg:
    """A small complete config: noisy policy group, clean critic group, reward, time-out, random reset."""
    cfg = EnvCfg(
        scene=toy_scene(),
        decimation=DECIMATION,
        episode_length_s=0.05,
        actions={"joint_pos": ActionTermCfg(JointPositionAction, {"scale": 0.5})},
        observations={
            "policy": ObsGroupCfg(
                {
                    "joint_pos": ObsTermCfg(joint_pos_rel, noise=GaussianNoiseCfg(0.01)),
                    "joint_vel": ObsTermCfg(joint_vel, scale=0.1),
                    "actions": ObsTermCfg(last_action),
                    "target": ObsTermCfg(command_obs),
                }
            ),
            "critic": ObsGroupCfg(
                {"root": ObsTermCfg(root_state), "joint_pos": ObsTermCfg(joint_pos_rel)},
                enable_corruption=False,
            ),
        },
        rewards={"alive": RewardTermCfg(constant, weight=1.0)},
        terminations={"time_out": TerminationTermCfg(time_out, time_out=True)},
        events={"reset_root": EventTermCfg(ResetRootRandom, "reset")},
        commands={"target": CommandTermCfg(UniformTargetCommand, resampling_time_range_s=(0.02, 0.04))},
    )
    return dataclasses.replace(cfg, **overrides)


def make_env(
    cfg: EnvCfg | None = None,
    *,
    seed: int = 0,
    sim: str = "mujoco",
    num_envs: int = NUM_ENVS,
    device: str = "cpu",
):
    """Build a toy env (on the CPU unless told otherwise)."""
    return ManagerBasedRlEnv(cfg or toy_cfg(), sim=sim, num_envs=num_envs, device=device, seed=seed)
