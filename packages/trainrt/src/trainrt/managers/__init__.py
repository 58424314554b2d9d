"""Managers of the RL env and their term configs (observation, action, reward, termination, event,
command, curriculum, metrics), plus null managers for empty groups."""

from trainrt.managers.action import ActionManager, ActionTerm, ActionTermCfg, JointPositionAction
from trainrt.managers.base import (
    REQUIRED,
    ManagerBase,
    ManagerTermBase,
    merge_term_params,
    term_param_defaults,
    term_param_names,
)
from trainrt.managers.command import CommandManager, CommandTerm, CommandTermCfg
from trainrt.managers.curriculum import CurriculumManager, CurriculumTermCfg
from trainrt.managers.env_protocol import ManagedEnv
from trainrt.managers.event import EVENT_MODES, EventManager, EventTerm, EventTermCfg
from trainrt.managers.metrics import MetricsManager, MetricTermCfg
from trainrt.managers.noise import GaussianNoiseCfg, NoiseCfg, UniformNoiseCfg
from trainrt.managers.null import (
    NullCommandManager,
    NullCurriculumManager,
    NullEventManager,
    NullManager,
    NullMetricsManager,
)
from trainrt.managers.observation import ObservationManager, ObsGroupCfg, ObsTermCfg
from trainrt.managers.reward import RewardManager, RewardTermCfg
from trainrt.managers.termination import TerminationManager, TerminationTermCfg

__all__ = [
    "EVENT_MODES",
    "REQUIRED",
    "ActionManager",
    "ActionTerm",
    "ActionTermCfg",
    "CommandManager",
    "CommandTerm",
    "CommandTermCfg",
    "CurriculumManager",
    "CurriculumTermCfg",
    "EventManager",
    "EventTerm",
    "EventTermCfg",
    "GaussianNoiseCfg",
    "JointPositionAction",
    "ManagedEnv",
    "ManagerBase",
    "ManagerTermBase",
    "MetricTermCfg",
    "MetricsManager",
    "NoiseCfg",
    "NullCommandManager",
    "NullCurriculumManager",
    "NullEventManager",
    "NullManager",
    "NullMetricsManager",
    "ObsGroupCfg",
    "ObsTermCfg",
    "ObservationManager",
    "RewardManager",
    "RewardTermCfg",
    "TerminationManager",
    "TerminationTermCfg",
    "UniformNoiseCfg",
    "merge_term_params",
    "term_param_defaults",
    "term_param_names",
]
