"""Write ``docs/tasks.md``, the task reference, from the registered task configs.

``uv run --frozen python -m trainrt.tasks.docs`` regenerates the file; ``--check`` exits 1 when the committed
file differs (``tests/test_tasks_docs.py`` does the same, so the reference never goes stale). Every term is
listed with its weight or mode and its effective parameters (the config's params over the term's declared
defaults, ``trainrt.managers.term_param_defaults``); observation dimensions come from building each task's env
once on the MuJoCo CPU backend with two worlds.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainrt.managers import REQUIRED, term_param_defaults

DOCS_FILE = Path(__file__).resolve().parents[5] / "docs" / "tasks.md"
"""Where the reference lives in the repository (``docs/tasks.md``)."""

REGENERATE_COMMAND = "uv run --frozen python -m trainrt.tasks.docs"

_LEADING_ARGS = {"events": 2, "curriculum": 2}  # (env, env_mask); every other kind takes (env)


def format_value(value: Any) -> str:
    """A compact, stable rendering of a config value (floats to 6 significant digits, no object ids)."""
    if value is REQUIRED:
        return "REQUIRED"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            return repr(value)
        return f"{value:.6g}"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (tuple, list)):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if isinstance(value, tuple) and len(value) == 1 else f"({inner})"
    if callable(value):
        return callable_path(value)
    return type(value).__name__


def callable_path(func: Any) -> str:
    """``module.qualname`` of a term function or class without the ``trainrt.`` prefix."""
    module = getattr(func, "__module__", "") or ""
    module = module.removeprefix("trainrt.")
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    return f"{module}.{name}" if module else name


def effective_params(func: Any, params: Mapping[str, Any], leading_args: int = 1) -> dict[str, Any]:
    """The config's ``params`` over the declared defaults, in declaration order then any extra keys."""
    declared = term_param_defaults(func, leading_args)
    merged = {**declared, **params}
    return {k: merged[k] for k in [*declared, *(k for k in params if k not in declared)]}


def _params_cell(func: Any, params: Mapping[str, Any], leading_args: int = 1) -> str:
    items = effective_params(func, params, leading_args)
    if not items:
        return "-"
    return "<br>".join(f"`{k}={_escape(format_value(v))}`" for k, v in items.items())


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _summary_line(factory: Any) -> str:
    """The first line of the task module's docstring (what the task is), in Markdown code quotes."""
    doc = inspect.getdoc(sys.modules[factory.__module__]) or inspect.getdoc(factory) or ""
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return first.replace("``", "`")


def _event_mode(cfg: Any) -> str:
    """``startup``, ``reset``, or ``interval (low, high) s``."""
    if cfg.mode == "interval":
        return f"interval {format_value(tuple(cfg.interval_range_s))} s"
    return cfg.mode


def _term_table(
    terms: Mapping[str, Any],
    extra: tuple[str, Callable[[Any], str]] | None = None,
    *,
    leading_args: int = 1,
) -> list[str]:
    """A table of term configs: name, an optional kind-specific column, function or class, params."""
    if not terms:
        return ["None."]
    rows = []
    for name, cfg in terms.items():
        func = getattr(cfg, "func", None) or cfg.cls  # function terms have func, command/action terms cls
        row = [f"`{name}`", *([extra[1](cfg)] if extra else []), f"`{callable_path(func)}`"]
        rows.append([*row, _params_cell(func, cfg.params, leading_args)])
    return _table(["term", *([extra[0]] if extra else []), "implementation", "params"], rows)


def _terrain_lines(env: Any) -> list[str]:
    """The terrain grid of an env with ``scene.terrain`` (none without)."""
    terrain = getattr(env, "terrain", None)
    if terrain is None:
        return []
    grid = terrain.cfg
    types = ", ".join(
        f"`{name}` ({type(cfg).__name__}, {sum(t == name for t in terrain.column_types)} columns)"
        for name, cfg in grid.types.items()
    )
    return [
        f"- terrain: {grid.num_rows} levels x {grid.num_cols} columns of {format_value(terrain.tile_size)} m "
        f"tiles, first levels 0 to {grid.max_init_level}, drawn from the run seed; types: {types}"
    ]


def _scene_mesh_lines(cfg: Any) -> list[str]:
    """The terrain meshes of the scene, and for a task that tracks a clip, the clips that bring a scene."""
    from trainrt.motion.scenes import CLIP_SCENES

    out = (
        [f"- terrain meshes: {', '.join(f'`{m.name}` from `{m.file}`' for m in cfg.scene.terrain_meshes)}"]
        if cfg.scene.terrain_meshes
        else []
    )
    tracks_a_clip = any("motion_file" in term_param_defaults(c.cls) for c in cfg.commands.values())
    if tracks_a_clip and CLIP_SCENES:
        clips = "; ".join(
            f"`{clip}`: "
            + ", ".join(f"`{m.file}` at {format_value(m.pos)}, quat {format_value(m.quat)}" for m in meshes)
            for clip, meshes in CLIP_SCENES.items()
        )
        out.append(
            "- clips that bring their scene (`task.motion_file=<clip>` puts its meshes, from the clip's folder, "
            f"in every world; `motion.scenes.CLIP_SCENES`): {clips}"
        )
    return out


def task_section(name: str, factory: Any, env: Any, spec: Any = None) -> list[str]:
    """The Markdown section of one task, from its config, a built env (observation dimensions) and its
    registration (``TaskSpec``: presets and evaluation)."""
    cfg = env.cfg
    scene = cfg.scene
    out = [f"## `{name}`", "", _summary_line(factory), ""]
    out += [f"- config factory: `{callable_path(factory)}`"]
    if spec is not None:
        out += [
            f"- presets: {', '.join(f'`{algo}`' for algo in spec.presets)}",
            f"- evaluation (`trainrt eval`): `{_ref_path(spec.evaluation)}`",
        ]
    out += [
        f"- control step: {format_value(env.step_dt)} s (decimation {cfg.decimation} x physics "
        f"{format_value(env.backend.physics_dt)} s); episode length {format_value(cfg.episode_length_s)} s "
        f"({env.max_episode_length} steps)",
        f"- read-plan bodies: {', '.join(f'`{b}`' for b in scene.plan_bodies) or '-'}",
        f"- contact bodies: {', '.join(f'`{b}`' for b in scene.contact_bodies) or '-'}",
        f"- actions: {env.num_actions}",
        *_terrain_lines(env),
        *_scene_mesh_lines(cfg),
        "",
    ]

    out += ["### Actions", ""]
    out += _term_table(cfg.actions)

    out += ["", "### Observations", ""]
    dims = env.observation_manager.group_obs_term_dim
    group_dims = env.observation_manager.group_obs_dim
    for group, group_cfg in cfg.observations.items():
        flags = [
            "concatenated" if group_cfg.concatenate else "one tensor per term",
            "noise on" if group_cfg.enable_corruption else "noise off",
        ]
        out += [f"Group `{group}`: {group_dims[group]} dims ({', '.join(flags)}).", ""]
        rows = []
        for term, t in group_cfg.terms.items():
            processing = []
            if t.noise is not None:
                fields = ", ".join(f"{k}={format_value(v)}" for k, v in vars(t.noise).items())
                processing.append(f"noise `{type(t.noise).__name__}({fields})`")
            if t.clip is not None:
                processing.append(f"clip {format_value(tuple(t.clip))}")
            if t.scale is not None:
                processing.append(f"scale {format_value(t.scale)}")
            if t.history_length:
                processing.append(f"history {t.history_length}")
            rows.append(
                [
                    f"`{term}`",
                    str(dims[group][term]),
                    f"`{callable_path(t.func)}`",
                    _params_cell(t.func, t.params),
                    _escape("; ".join(processing)) or "-",
                ]
            )
        out += _table(["term", "dim", "function", "params", "processing"], rows)
        out += [""]

    out += ["### Commands", ""]
    out += _term_table(
        cfg.commands, ("resampling (s)", lambda c: format_value(tuple(c.resampling_time_range_s)))
    )
    out += [
        "",
        "### Rewards",
        "",
        "Each step adds `weight * term * step_dt`; negative weights are penalties.",
        "",
    ]
    out += _term_table(cfg.rewards, ("weight", lambda c: format_value(float(c.weight))))
    out += [
        "",
        "### Terminations",
        "",
        "Time-out terms truncate (the learner bootstraps); the others fail.",
        "",
    ]
    out += _term_table(cfg.terminations, ("kind", lambda c: "time-out" if c.time_out else "failure"))
    out += ["", "### Events", ""]
    out += _term_table(cfg.events, ("mode", _event_mode), leading_args=_LEADING_ARGS["events"])
    out += ["", "### Curriculum", ""]
    out += _term_table(cfg.curriculum, leading_args=_LEADING_ARGS["curriculum"])
    out += ["", "### Metrics", ""]
    out += _term_table(cfg.metrics)
    return [*out, ""]


def _ref_path(ref: Any) -> str:
    """A registry reference as ``module.attr`` (the ``"module:attr"`` string, or the callable's path)."""
    return ref.replace(":", ".").removeprefix("trainrt.") if isinstance(ref, str) else callable_path(ref)


def render_tasks_doc() -> str:
    """The full text of ``docs/tasks.md`` for the tasks registered by this package (``trainrt.tasks``; tasks
    of modules named in ``$TRAINRT_TASK_MODULES`` are left out)."""
    from trainrt.envs import ManagerBasedRlEnv
    from trainrt.tasks.registry import task_names, task_spec

    specs = [task_spec(name) for name in task_names()]
    specs = [spec for spec in specs if spec.module.startswith("trainrt.tasks.")]

    out = [
        "# Task reference",
        "",
        f"Generated from the task configs by `{REGENERATE_COMMAND}`; do not edit by hand (a test fails when",
        "this file is stale). Parameters are the effective ones: the task's params over the term's declared",
        "defaults. How terms, managers and tasks fit together: [design.md](design.md); how to add a task or a",
        "term: [extending.md](extending.md).",
        "",
        "Tasks: " + ", ".join(f"[`{spec.name}`](#{spec.name})" for spec in specs) + ".",
        "",
    ]
    for spec in specs:
        factory = spec.env_cfg_factory()
        env = ManagerBasedRlEnv(factory(), sim="mujoco", num_envs=2, device="cpu", seed=0)
        try:
            out += task_section(spec.name, factory, env, spec)
        finally:
            env.close()
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or, with ``--check``, compare) the task reference; return the exit code."""
    parser = argparse.ArgumentParser(prog="python -m trainrt.tasks.docs", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS_FILE, help="file to write (default: docs/tasks.md)")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the file differs instead of writing"
    )
    args = parser.parse_args(argv)
    text = render_tasks_doc()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is stale; run `{REGENERATE_COMMAND}`", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
