"""Partial overrides of a task's terms (``task.rewards.<term>.weight=...``), checked against the task's config.

The ``task`` config section holds, per manager, a dict ``term name -> changes``; the changes are applied on top
of what the task factory builds. What each manager's term accepts:

========================  =================================================================================
section                   keys of one term's changes
========================  =================================================================================
``actions``               ``params``
``rewards``               ``weight``, ``params``, ``enabled``
``terminations``          ``params``, ``time_out``, ``enabled``
``events``                ``params``, ``interval_range_s``, ``enabled``
``commands``              ``params``, ``resampling_time_range_s``
``observations``          one level deeper, group then term (``task.observations.policy.joint_vel.scale``):
                          ``params``, ``scale``, ``clip``, ``noise``, ``history_length``, ``enabled``
========================  =================================================================================

``params`` is merged over the term's params (a nested dict such as a ``velocity_range`` is merged key by key, the
override's keys first, so that in a ``{pattern: value}`` dict, where the first matching pattern wins, they win);
``enabled: false`` removes the term. ``noise`` changes the fields of the term's own noise (``{std: 0.05}`` for
Gaussian noise, ``{n_min: -0.1, n_max: 0.1}`` for uniform), so a term without noise has none to change. Every
name is checked: an unknown term lists the task's terms, an unknown
key lists the keys above, an unknown param lists the term's declared params, and a value whose type differs
from the task's value (or the declared default) is refused. Cold path only.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED
from trainrt.managers.base import term_param_defaults

TERM_SECTIONS: tuple[str, ...] = ("actions", "rewards", "terminations", "events", "commands")
"""The ``task`` fields that hold per-term overrides, named like the ``EnvCfg`` fields they change."""

TERM_OVERRIDE_KEYS: dict[str, tuple[str, ...]] = {
    "actions": ("params",),
    "rewards": ("weight", "params", "enabled"),
    "terminations": ("params", "time_out", "enabled"),
    "events": ("params", "interval_range_s", "enabled"),
    "commands": ("params", "resampling_time_range_s"),
}
"""The changes each section's terms accept."""

OBSERVATION_OVERRIDE_KEYS: tuple[str, ...] = ("params", "scale", "clip", "noise", "history_length", "enabled")
"""The changes an observation term accepts (``task.observations.<group>.<term>.<key>``)."""

_LEADING_ARGS = {"events": 2}  # event functions take (env, env_mask, **params); the others (env, **params)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@cold_path
def checked_value(key: str, value: Any, current: Any) -> Any:
    """``value`` for the config entry ``key`` whose present value is ``current``: same kind, nested dicts merged.

    ValueError naming ``key`` when the kinds differ (a number for a number, a list of the same length for a
    tuple or list, a dict for a dict, text for text, true/false for a flag). ``None`` or ``REQUIRED`` accept any.
    """
    if current is None or current is REQUIRED:
        return value
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return value
    if _is_number(current):
        if not _is_number(value):
            raise ValueError(f"{key}: expected a number, got {value!r}")
        return float(value) if isinstance(current, float) else value
    if isinstance(current, str):
        if not isinstance(value, str):
            raise ValueError(f"{key}: expected text, got {value!r}")
        return value
    if isinstance(current, tuple | list):
        if not isinstance(value, tuple | list):
            raise ValueError(f"{key}: expected a list like {list(current)!r}, got {value!r}")
        if current and len(value) != len(current):
            raise ValueError(f"{key}: expected {len(current)} values like {list(current)!r}, got {value!r}")
        items = [
            checked_value(f"{key}[{i}]", v, current[i] if current else None) for i, v in enumerate(value)
        ]
        return tuple(items) if isinstance(current, tuple) else items
    if isinstance(current, Mapping):
        if not isinstance(value, Mapping):
            raise ValueError(f"{key}: expected a mapping like {dict(current)!r}, got {value!r}")
        return _given_keys_first(
            {name: checked_value(f"{key}.{name}", item, current.get(name)) for name, item in value.items()},
            current,
        )
    return value


def _given_keys_first(given: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` followed by the entries of ``current`` it does not replace.

    Order matters where keys are patterns and the first match wins (an action's per-joint ``scale``, a term's
    per-joint values): an override ``{".*": 0.5}`` must win over the task's own per-joint entries, as an
    override of one joint's name wins for that joint.
    """
    return dict(given) | {name: item for name, item in current.items() if name not in given}


def _term_callable(term_cfg: Any) -> Any:
    return term_cfg.cls if hasattr(term_cfg, "cls") else term_cfg.func


@cold_path
def _changed_noise(where: str, noise: Any, changes: Any) -> Any:
    """``noise`` (a noise config dataclass) with the fields in ``changes`` replaced, each checked."""
    if noise is None:
        raise ValueError(f"{where}: the term has no noise to change; its task adds none")
    fields = {f.name: getattr(noise, f.name) for f in dataclasses.fields(noise)}
    if not isinstance(changes, Mapping):
        raise ValueError(
            f"{where}: expected a mapping of {sorted(fields)} ({type(noise).__name__}), got {changes!r}"
        )
    unknown = sorted(set(changes) - set(fields))
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; {type(noise).__name__} has {sorted(fields)}")
    checked = {key: checked_value(f"{where}.{key}", value, fields[key]) for key, value in changes.items()}
    try:
        return dataclasses.replace(noise, **checked)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {err}") from None


@cold_path
def _override_term(
    where: str, allowed: tuple[str, ...], leading_args: int, term_cfg: Any, changes: Any
) -> Any | None:
    """The term config at ``task.<where>`` with ``changes`` applied (``None``: the term is removed)."""
    where = f"task.{where}"
    if not isinstance(changes, Mapping):
        raise ValueError(f"{where}: expected a mapping of {list(allowed)}, got {changes!r}")
    unknown = sorted(set(changes) - set(allowed))
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}; valid keys: {list(allowed)}")
    if "enabled" in changes:
        if not isinstance(changes["enabled"], bool):
            raise ValueError(f"{where}.enabled: expected true or false, got {changes['enabled']!r}")
        if not changes["enabled"]:
            return None
    update: dict[str, Any] = {}
    if "params" in changes:
        params = changes["params"]
        if not isinstance(params, Mapping):
            raise ValueError(f"{where}.params: expected a mapping of param names to values, got {params!r}")
        declared = term_param_defaults(_term_callable(term_cfg), leading_args)
        unknown = sorted(set(params) - set(declared))
        if unknown:
            raise ValueError(f"{where}.params: unknown params {unknown}; valid params: {sorted(declared)}")
        merged = copy.deepcopy(dict(term_cfg.params))
        for key, value in params.items():
            current = term_cfg.params.get(key, declared[key])
            merged[key] = checked_value(f"{where}.params.{key}", value, current)
        update["params"] = merged
    for key in ("weight", "time_out", "interval_range_s", "resampling_time_range_s"):
        if key in changes:
            update[key] = checked_value(f"{where}.{key}", changes[key], getattr(term_cfg, key))
    if "scale" in changes:  # one number, or one per column, also where the task scales nothing
        scale = changes["scale"]
        if _is_number(scale):
            update["scale"] = float(scale)
        elif isinstance(scale, list | tuple) and scale and all(_is_number(v) for v in scale):
            update["scale"] = [float(v) for v in scale]
        else:
            raise ValueError(
                f"{where}.scale: expected a number or a list of numbers (one per column), got {scale!r}"
            )
    if "clip" in changes:  # (low, high) numbers, also where the task clips nothing
        update["clip"] = checked_value(f"{where}.clip", changes["clip"], term_cfg.clip or (0.0, 0.0))
    if "history_length" in changes:
        length = changes["history_length"]
        if not isinstance(length, int) or isinstance(length, bool) or length < 0:
            raise ValueError(f"{where}.history_length: expected a whole number >= 0, got {length!r}")
        update["history_length"] = length
    if "noise" in changes:
        update["noise"] = _changed_noise(f"{where}.noise", term_cfg.noise, changes["noise"])
    try:
        return dataclasses.replace(term_cfg, **update)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: {err}") from None


@cold_path
def apply_term_overrides(env_cfg: EnvCfg, section: str, overrides: Mapping[str, Any]) -> None:
    """Apply one section's per-term ``overrides`` to ``env_cfg`` in place; ValueError naming the valid names."""
    if section not in TERM_SECTIONS:
        raise ValueError(f"unknown task section {section!r}; valid: {list(TERM_SECTIONS)}")
    terms: dict[str, Any] = getattr(env_cfg, section)
    for name, changes in overrides.items():
        if name not in terms:
            raise ValueError(f"task.{section}: unknown term {name!r}; valid terms: {sorted(terms)}")
        replaced = _override_term(
            f"{section}.{name}",
            TERM_OVERRIDE_KEYS[section],
            _LEADING_ARGS.get(section, 1),
            terms[name],
            changes,
        )
        if replaced is None:
            del terms[name]
        else:
            terms[name] = replaced


@cold_path
def apply_observation_overrides(env_cfg: EnvCfg, overrides: Mapping[str, Any]) -> None:
    """Apply ``{group: {term: changes}}`` to ``env_cfg.observations`` in place; ValueError naming valid names.

    A group whose terms are all disabled is refused: the agent needs something to observe.
    """
    groups = env_cfg.observations
    for group_name, terms in overrides.items():
        where = f"task.observations.{group_name}"
        if group_name not in groups:
            raise ValueError(
                f"task.observations: unknown group {group_name!r}; valid groups: {sorted(groups)}"
            )
        group = groups[group_name]
        if not isinstance(terms, Mapping):
            raise ValueError(f"{where}: expected a mapping of term names to changes, got {terms!r}")
        new_terms = dict(group.terms)
        for name, changes in terms.items():
            if name not in new_terms:
                raise ValueError(f"{where}: unknown term {name!r}; valid terms: {sorted(group.terms)}")
            replaced = _override_term(
                f"observations.{group_name}.{name}", OBSERVATION_OVERRIDE_KEYS, 1, new_terms[name], changes
            )
            if replaced is None:
                del new_terms[name]
            else:
                new_terms[name] = replaced
        if not new_terms:
            raise ValueError(f"{where}: every term of the group is disabled; keep at least one")
        groups[group_name] = dataclasses.replace(group, terms=new_terms)


@cold_path
def set_motion_file(env_cfg: EnvCfg, task: str, motion_file: str) -> None:
    """Point the task's motion command (the command term with a ``motion_file`` param) at ``motion_file``, and
    give the scene the terrain meshes that clip needs (``trainrt.motion.scenes``; none for most clips)."""
    commands = [
        name
        for name, term in env_cfg.commands.items()
        if "motion_file" in term_param_defaults(_term_callable(term))
    ]
    if not commands:
        raise ValueError(f"task.motion_file: task {task!r} tracks no motion clip (it has no motion command)")
    for name in commands:
        term = env_cfg.commands[name]
        env_cfg.commands[name] = dataclasses.replace(term, params={**term.params, "motion_file": motion_file})
    from trainrt.tasks.tracking.env_cfg import clip_terrain_meshes

    try:
        meshes = clip_terrain_meshes(motion_file)
    except FileNotFoundError as err:
        raise ValueError(f"task.motion_file: {err}") from None
    env_cfg.scene = dataclasses.replace(env_cfg.scene, terrain_meshes=meshes)


@cold_path
def merge_term_overrides(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge two per-term override dicts (``extra`` wins), e.g. an evaluation's over a run's."""
    merged = {
        key: merge_term_overrides(base[key], value)
        if isinstance(value, Mapping) and isinstance(base.get(key), Mapping)
        else copy.deepcopy(value)
        for key, value in extra.items()
    }
    return _given_keys_first(merged, copy.deepcopy(dict(base)))
