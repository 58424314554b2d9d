"""Training configuration: the pydantic schema, the presets, dotted command-line overrides, how a command line
resolves to a config (``resolve_train_config``), and how a run directory's config is read back
(``load_resolved_config``, ``rollout_config``). The command line calls these and prints; so can any Python caller."""

from trainrt.config.overrides import OverrideError, apply_overrides, parse_override, parse_scalar
from trainrt.config.presets import PRESETS, cpu_demo_preset, preset, preset_pairs
from trainrt.config.resolve import resolve_train_config
from trainrt.config.run_config import load_resolved_config, rollout_config
from trainrt.config.schema import (
    ALGO_NAMES,
    SIM_BACKEND_NAMES,
    AlgoSection,
    DistributedSection,
    FlashSacAlgoSection,
    SacAlgoSection,
    SimSection,
    TaskSection,
    TrainConfig,
    TrainingSection,
    WandbSection,
    load_stored_config,
)

__all__ = [
    "ALGO_NAMES",
    "PRESETS",
    "SIM_BACKEND_NAMES",
    "AlgoSection",
    "DistributedSection",
    "FlashSacAlgoSection",
    "OverrideError",
    "SacAlgoSection",
    "SimSection",
    "TaskSection",
    "TrainConfig",
    "TrainingSection",
    "WandbSection",
    "apply_overrides",
    "cpu_demo_preset",
    "load_resolved_config",
    "load_stored_config",
    "parse_override",
    "parse_scalar",
    "preset",
    "preset_pairs",
    "resolve_train_config",
    "rollout_config",
]
