"""Base classes of stateful terms that select bodies, contact bodies or joints by name once, at construction.

The names come from the term's ``params`` (``body_names``, ``contact_body_names``, ``joint_names``, each
declared ``REQUIRED`` in ``PARAMS``; subclasses extend ``PARAMS`` with their own); the resolved indices are
device tensors, so the per-step ``__call__`` only gathers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED, ManagerTermBase
from trainrt.mdp.name_matching import match_names

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


@cold_path
def nonempty_names(owner: str, params: Mapping[str, Any], key: str) -> list[str]:
    """``params[key]`` as a non-empty list of names (a single string is one name); ValueError otherwise."""
    value = params[key]
    names = [value] if isinstance(value, str) else list(value or ())
    if not names:
        raise ValueError(f"{owner} needs a non-empty params[{key!r}]")
    return names


class BodySubsetTerm(ManagerTermBase):
    """A term over read-plan bodies ``params['body_names']``: ``self.body_ids`` (B,) long."""

    PARAMS: ClassVar[Mapping[str, Any]] = {"body_names": REQUIRED}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        names = nonempty_names(type(self).__name__, self.params, "body_names")
        self.body_ids = torch.tensor(env.robot.body_ids(names), dtype=torch.long, device=env.device)


class ContactSubsetTerm(ManagerTermBase):
    """A term over the plan's contact bodies ``params['contact_body_names']``: ``self.contact_ids`` (C,) long."""

    PARAMS: ClassVar[Mapping[str, Any]] = {"contact_body_names": REQUIRED}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        names = nonempty_names(type(self).__name__, self.params, "contact_body_names")
        self.contact_ids = torch.tensor(
            [env.plan.contact_index(name) for name in names], dtype=torch.long, device=env.device
        )


class ContactThresholdTerm(ContactSubsetTerm):
    """A contact-body term that counts a body in contact above ``params['force_threshold']`` newtons."""

    PARAMS: ClassVar[Mapping[str, Any]] = {**ContactSubsetTerm.PARAMS, "force_threshold": 1.0}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.force_threshold = float(self.params["force_threshold"])

    def in_contact(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Whether each selected contact body is in contact (num_envs, C) bool."""
        return contact_mask(env, self.contact_ids, self.force_threshold)


class JointSubsetTerm(ManagerTermBase):
    """A term over the robot joints matched by ``params['joint_names']``: ``self.joint_ids`` (J,) long."""

    PARAMS: ClassVar[Mapping[str, Any]] = {"joint_names": REQUIRED}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        patterns = nonempty_names(type(self).__name__, self.params, "joint_names")
        self.joint_names = [
            env.robot.joint_names[i] for i in match_names(patterns, env.robot.joint_names, "joint")
        ]
        self.joint_ids = torch.tensor(
            [env.robot.joint_names.index(n) for n in self.joint_names], dtype=torch.long, device=env.device
        )


def contact_mask(env: ManagerBasedRlEnv, contact_ids: torch.Tensor, force_threshold: float) -> torch.Tensor:
    """Whether the net contact force on each selected contact body exceeds ``force_threshold`` N (num_envs, C)."""
    return env.robot.contact_force[:, contact_ids].norm(dim=-1) > force_threshold
