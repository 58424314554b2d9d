"""Packed reset transaction: a validated channel spec, full-width payloads and the masked, sync-free apply."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import torch

from simcore._src.config import CONSTANT_SOURCE_FIELDS, PER_WORLD_MODEL_FIELDS

STATE_CHANNELS: tuple[str, ...] = (
    "time",
    "qpos",
    "qvel",
    "act",
    "ctrl",
    "qacc_warmstart",
    "mocap_pos",
    "mocap_quat",
)
"""Simulation state a reset can write, besides the backend's per-world model fields."""


@dataclasses.dataclass(frozen=True, eq=False)
class ResetSpec:
    """The channels of one reset transaction, validated against a backend at construction.

    Attributes:
        channels: state channels and per-world model fields the transaction writes.
        recompute_constants: whether a mass, inertia or armature field is written, so the backend recomputes
            MuJoCo's derived constants (subtree mass, inverse weights) inside the transaction.
        backend_id: identity of the backend the spec was built for.
    """

    channels: tuple[str, ...]
    recompute_constants: bool
    backend_id: int
    _targets: Mapping[str, torch.Tensor] = dataclasses.field(repr=False)

    def new_payload(self) -> dict[str, torch.Tensor]:
        """Full-width payload buffers ``{channel: (num_envs, ...)}``, initialized to the current live values.

        Allocate once and reuse every step: fill the rows you reset, leave the rest as they are.
        """
        return {name: self._targets[name].clone() for name in self.channels}


def build_reset_spec(
    targets: Mapping[str, torch.Tensor],
    channels: Sequence[str],
    *,
    backend_name: str,
    backend_id: int,
) -> ResetSpec:
    """Validate ``channels`` against the live arrays ``targets`` a backend can reset; ValueError otherwise."""
    if isinstance(channels, str):
        raise ValueError(f"channels must be a sequence of names, got the string {channels!r}")
    channels = tuple(channels)
    valid = list(targets)
    unknown = [c for c in channels if c not in targets]
    if unknown:
        not_per_world = [c for c in unknown if c in PER_WORLD_MODEL_FIELDS]
        hint = (
            f" ({not_per_world} are not per-world on this backend: add them to SimConfig.randomized_fields)"
            if not_per_world
            else ""
        )
        raise ValueError(
            f"unknown reset channels {unknown} for backend {backend_name!r}{hint}; valid: {valid}"
        )
    if len(set(channels)) != len(channels):
        raise ValueError(f"duplicate reset channels in {list(channels)}")
    recompute = any(c in CONSTANT_SOURCE_FIELDS for c in channels)
    return ResetSpec(
        channels=channels,
        recompute_constants=recompute,
        backend_id=backend_id,
        _targets={c: targets[c] for c in channels},
    )


def check_reset_arguments(
    mask: torch.Tensor,
    payload: Mapping[str, torch.Tensor],
    spec: ResetSpec,
    num_envs: int,
    device: torch.device,
) -> None:
    """Metadata checks only (shapes, dtypes, devices): no tensor values are read, so nothing synchronizes."""
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or mask.dim() != 1:
        raise ValueError(f"mask must be a (num_envs,) bool tensor, got {getattr(mask, 'dtype', type(mask))}")
    if mask.shape[0] != num_envs or mask.device != torch.device(device):
        raise ValueError(f"mask must be ({num_envs},) on {device}, got {tuple(mask.shape)} on {mask.device}")
    missing = [c for c in spec.channels if c not in payload]
    if missing:
        raise ValueError(f"payload lacks channels {missing} of the spec {list(spec.channels)}")
    extra = [c for c in payload if c not in spec.channels]
    if extra:
        raise ValueError(
            f"payload has channels {extra} the spec does not write ({list(spec.channels)}); they would be "
            "ignored: build the spec with them (backend.reset_spec([...])) or leave them out of the payload"
        )
    for name in spec.channels:
        target, value = spec._targets[name], payload[name]
        if value.shape != target.shape or value.dtype != target.dtype or value.device != target.device:
            raise ValueError(
                f"payload[{name!r}] must be {tuple(target.shape)} {target.dtype} on {target.device}, "
                f"got {tuple(value.shape)} {value.dtype} on {value.device}"
            )


def apply_masked(mask: torch.Tensor, payload: Mapping[str, torch.Tensor], spec: ResetSpec) -> None:
    """Rows where ``mask`` is true take the payload; other rows keep every bit (elementwise select, in place)."""
    for name in spec.channels:
        target = spec._targets[name]
        row_mask = mask.view(-1, *([1] * (target.dim() - 1)))
        torch.where(row_mask, payload[name], target, out=target)


def clear_masked(mask: torch.Tensor, target: torch.Tensor, columns: torch.Tensor | None = None) -> None:
    """Zero ``target`` in masked rows (optionally only where the bool ``columns`` mask is true), in place."""
    row_mask = mask.view(-1, *([1] * (target.dim() - 1)))
    select = row_mask if columns is None else row_mask & columns
    target.masked_fill_(select, 0)
