"""The manager-based RL env, its configs and the robot state view."""

from trainrt.envs.env_cfg import EnvCfg, SceneCfg
from trainrt.envs.manager_based_rl_env import ManagerBasedRlEnv, StepResult
from trainrt.envs.robot_view import RobotView

__all__ = ["EnvCfg", "ManagerBasedRlEnv", "RobotView", "SceneCfg", "StepResult"]
