"""Base classes of stateful terms that select bodies, contact bodies or joints by name once, at construction.

The names come from the term's ``params`` (``body_names``, ``contact_body_names``, ``joint_names``); the
resolved indices are device tensors, so the per-step ``__call__`` only gathers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers import ManagerTermBase
from trainrt.mdp.name_matching import match_names

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


@cold_path
def _required(cfg: Any, key: str, owner: str) -> Any:
    value = cfg.params.get(key)
    if not value:
        raise ValueError(f"{owner} needs params[{key!r}]")
    return value


class BodySubsetTerm(ManagerTermBase):
    """A term over read-plan bodies ``params['body_names']``: ``self.body_ids`` (B,) long."""

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        names = _required(cfg, "body_names", type(self).__name__)
        self.body_ids = torch.tensor(env.robot.body_ids(names), dtype=torch.long, device=env.device)


class ContactSubsetTerm(ManagerTermBase):
    """A term over the plan's contact bodies ``params['contact_body_names']``: ``self.contact_ids`` (C,) long."""

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        names = _required(cfg, "contact_body_names", type(self).__name__)
        names = [names] if isinstance(names, str) else list(names)
        self.contact_ids = torch.tensor(
            [env.plan.contact_index(name) for name in names], dtype=torch.long, device=env.device
        )


class JointSubsetTerm(ManagerTermBase):
    """A term over the robot joints matched by ``params['joint_names']``: ``self.joint_ids`` (J,) long."""

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        patterns = _required(cfg, "joint_names", type(self).__name__)
        self.joint_names = [
            env.robot.joint_names[i] for i in match_names(patterns, env.robot.joint_names, "joint")
        ]
        self.joint_ids = torch.tensor(
            [env.robot.joint_names.index(n) for n in self.joint_names], dtype=torch.long, device=env.device
        )


def contact_mask(env: ManagerBasedRlEnv, contact_ids: torch.Tensor, force_threshold: float) -> torch.Tensor:
    """Whether the net contact force on each selected contact body exceeds ``force_threshold`` N (num_envs, C)."""
    return env.robot.contact_force[:, contact_ids].norm(dim=-1) > force_threshold
