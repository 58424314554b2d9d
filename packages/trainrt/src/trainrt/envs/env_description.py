"""What an env tells about itself: the start-up summary, the full per-manager tables, the action layout and
the published episode statistics.

Cold-path text and metadata built from a `ManagerBasedRlEnv` and its managers; the env's ``summary()``,
``str(env)``, ``action_meta()`` and ``episode_stats()`` return these. Each function takes the env as ``env``
(typed ``Any``: this module does not import the env's, which imports it).
"""

from __future__ import annotations

import os
from typing import Any

from trainrt.hotpath import cold_path

SUMMARY_WIDTH = 120
"""Line width of ``ManagerBasedRlEnv.summary`` (term names that do not fit are counted as ``+N more``)."""


@cold_path
def _name_list(names: list[str], budget: int) -> str:
    """``names`` joined with ", ", whole names only, within ``budget`` characters; the rest as ``+N more``."""
    shown: list[str] = []
    for i, name in enumerate(names):
        rest = len(names) - i - 1
        tail = f", +{rest} more" if rest else ""
        if shown and len(", ".join([*shown, name]) + tail) > budget:
            return ", ".join(shown) + f", +{len(names) - i} more"
        shown.append(name)
    return ", ".join(shown)


@cold_path
def env_managers(env: Any) -> tuple[Any, ...]:
    """The env's managers in the order the summary and the tables list them."""
    return (
        env.action_manager,
        env.observation_manager,
        env.reward_manager,
        env.termination_manager,
        env.event_manager,
        env.command_manager,
        env.curriculum_manager,
        env.metrics_manager,
    )


@cold_path
def env_header(env: Any) -> str:
    """The first line of the summary and the tables: size, backend, device and timing."""
    return (
        f"ManagerBasedRlEnv: {env.num_envs} envs on {env.backend.name} ({env.device}), "
        f"step_dt {env.step_dt:g} s, max_episode_length {env.max_episode_length}"
    )


@cold_path
def scene_line(env: Any) -> str | None:
    """The ground the task adds to the robot's model, in one line (None for the model's own ground): the
    terrain grid (levels, columns per type, tile size, first levels) and the static meshes in every world."""
    parts = []
    terrain = getattr(env, "terrain", None)
    if terrain is not None:
        types = ", ".join(
            f"{name} {terrain.column_types.count(name)}" for name in dict.fromkeys(terrain.column_types)
        )
        parts.append(
            f"terrain grid of {terrain.num_levels} levels x {len(terrain.column_types)} columns of "
            f"{terrain.tile_size:g} m tiles ({types}), first levels 0-{terrain.cfg.max_init_level}"
        )
    for mesh in env.cfg.scene.terrain_meshes:
        x, y, z = mesh.pos
        parts.append(f"mesh {os.path.basename(mesh.file)} at ({x:g}, {y:g}, {z:g}) in every world")
    return f"  scene: {'; '.join(parts)}" if parts else None


@cold_path
def env_summary(env: Any, width: int = SUMMARY_WIDTH) -> str:
    """The env in a few lines: the header, the ground the task adds (if any), then per manager its term count
    and names (cut to ``width``)."""
    lines = [env_header(env)]
    scene = scene_line(env)
    if scene is not None:
        lines.append(scene)
    for manager in env_managers(env):
        terms = manager.active_terms
        if isinstance(terms, dict):  # observation groups: sizes, then each distinct term name once
            count = sum(len(group) for group in terms.values())
            sizes = ", ".join(f"{group} {len(names)}" for group, names in terms.items())
            label = f"  {manager.kind}: {count} term{'' if count == 1 else 's'} ({sizes})"
            names = list(dict.fromkeys(name for group in terms.values() for name in group))
        else:
            count, names = len(terms), list(terms)
            label = f"  {manager.kind}: {count} term{'' if count == 1 else 's'}"
        lines.append(f"{label}: {_name_list(names, width - len(label) - 2)}" if names else label)
    return "\n".join(lines)


@cold_path
def env_tables(env: Any) -> str:
    """The header, then every manager's full table of terms."""
    return "\n".join([env_header(env), *(str(m) for m in env_managers(env))])


@cold_path
def action_meta_of(env: Any) -> dict[str, Any]:
    """Action layout for export and deployment: joint names, default pose, gains, action scale, timing.

    List-valued keys concatenate the action terms in order; ``terms`` keeps each term's own description.
    """
    terms = env.action_manager.meta()
    meta: dict[str, Any] = {
        "num_actions": env.num_actions,
        "step_dt": env.step_dt,
        "physics_dt": env.physics_dt,
        "decimation": env.cfg.decimation,
        "terms": terms,
    }
    for key in ("joint_names", "default_joint_pos", "action_scale", "kp", "kd", "effort_limit"):
        if terms and all(key in t for t in terms.values()):
            meta[key] = [v for t in terms.values() for v in t[key]]
    return meta


@cold_path
def episode_stats_of(env: Any, finished: float, length_sum: float) -> dict[str, float]:
    """The statistics ``env.episode_stats()`` publishes, given the number of episodes finished since its last
    call and the sum of their lengths: the episode count and mean length, then each manager's own statistics
    (which its ``publish_episode_stats`` zeroes), the curriculum state and the non-finite reset count."""
    stats: dict[str, float] = {"Episode/num_finished": finished}
    if finished > 0:
        stats["Episode/length"] = length_sum / finished
    stats.update(env.reward_manager.publish_episode_stats(finished))
    stats.update(env.termination_manager.publish_episode_stats(finished))
    stats.update(env.metrics_manager.publish_episode_stats(finished))
    stats.update(env.curriculum_manager.publish_state())
    stats["Diagnostics/nonfinite_resets"] = float(env.nonfinite_resets.cpu())
    return stats
