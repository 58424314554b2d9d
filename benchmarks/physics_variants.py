"""DIAGNOSTIC: the bare physics step of a task's scene under backend variants, from the same states.

    python benchmarks/physics_variants.py [--task g1_motion_tracking] [--num-envs 2048] [--steps 200]
        [--rounds 3] [--out result.json]

Builds one backend per variant of ``simcore.SimConfig`` (the scene, decimation and contact buffers of the
task; only the variant's fields differ) and times a graph of K control steps (K = the collector's
``training.collector_steps_per_replay``), replayed from two saved states copied into every variant in place:

- ``standing``: every robot at the default pose, PD targets at the default pose (``trainrt bench physics``);
- ``stumbling``: after ``--stir-steps`` control steps of random PD targets around the default pose, so robots
  are off balance, falling or down, with many contacts;
- ``collected`` (``--collected-steps`` > 0): the task's own env after that many steps of uniform random
  actions, as the collector's replay prefill takes them: the task's resets (a tracking env starts robots on
  the clip's poses), its events and its action mapping, so the states the collector's physics meets early
  in training.

Variants run alternately within each round, each from a fresh copy of the state, so machine drift hits every
variant alike; the medians and the ratios to ``default`` are reported, with the constraint solver's
iterations per substep (mean and max over worlds) after each timing. Variants:

- ``default``: the simcore defaults (sensors on the last substep only, conditional solver loop);
- ``sensors_every_substep``: sensors on every substep, as before (``SimConfig.sensors_every_substep``);
- ``unrolled_solver``: every solver iteration in the graph, no conditional node (``graph_conditional``);
- ``solver_iterations_5``, ``solver_tolerance_1e-6`` and ``ccd_iterations_12`` (on request): physics changes,
  to see what they would buy (the last caps the general convex collision's GJK and EPA iterations, 35 by
  default, which a foot's capsules meet once per heightfield prism under them);
- ``box_soles`` (on request): a model change, to see what it would buy: each foot's sole geoms (``--sole-geoms``,
  a regex; default the task's ``foot_friction`` event's geoms) become one box, their bounding box in the foot's
  frame (``box_soles``), so a foot meets the ground as one box instead of several capsules (the G1's seven
  per foot: fewer collision pairs and contacts, most of all on a heightfield).

It attributes time; the acceptance number stays ``tail_env_steps_per_sec`` of a training run.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from typing import Any

import mujoco
import numpy as np
import torch

import simcore
from trainrt.config.resolve import resolve_train_config
from trainrt.runner.bench import physics_backend
from trainrt.runner.build import build_env, make_env_cfg
from trainrt.terrain.scene import TerrainScene, scene_model

VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "sensors_every_substep": {"sensors_every_substep": True},
    "unrolled_solver": {"graph_conditional": False},
    "solver_iterations_5": {"options": {"iterations": 5}},
    "solver_tolerance_1e-6": {"options": {"tolerance": 1e-6}},
    "ccd_iterations_12": {"options": {"ccd_iterations": 12}},
    "box_soles": {"model": "box_soles"},
}
"""Variant name -> the SimConfig fields it changes, and under ``options`` the physics options it sets with
``set_option``. The first three give the same physics at another cost; the option variants change the physics
(fewer solver or collision iterations, an earlier stop) and only say what such a change would buy."""

DEFAULT_VARIANTS = ("default", "sensors_every_substep", "unrolled_solver")


def _aabb_in_body(model: mujoco.MjModel, geom: int) -> tuple[np.ndarray, np.ndarray]:
    """The (low, high) corners of a capsule's, sphere's or box's bounding box in its body's frame."""
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, model.geom_quat[geom])
    rot, pos, size = rot.reshape(3, 3), model.geom_pos[geom], model.geom_size[geom]
    kind = model.geom_type[geom]
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE:
        points, pad = pos[None, :], size[0]
    elif kind == mujoco.mjtGeom.mjGEOM_CAPSULE:
        points, pad = pos + np.outer([-1.0, 1.0], rot[:, 2] * size[1]), size[0]
    elif kind == mujoco.mjtGeom.mjGEOM_BOX:
        signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=float)
        points, pad = pos + (signs * size) @ rot.T, 0.0
    else:
        raise ValueError(f"geom {model.geom(geom).name!r}: box_soles takes spheres, capsules and boxes")
    return points.min(axis=0) - pad, points.max(axis=0) + pad


def box_soles(model: mujoco.MjModel, sole_geoms: str) -> mujoco.MjModel:
    """``model`` changed in place: per body, the geoms whose names match ``sole_geoms`` become one box, their
    bounding box in the body's frame. The first keeps its contact properties and becomes the box; the others
    stop colliding (contype and conaffinity 0). ValueError when no geom matches."""
    pattern = re.compile(sole_geoms)
    by_body: dict[int, list[int]] = {}
    for geom in range(model.ngeom):
        if pattern.fullmatch(model.geom(geom).name):
            by_body.setdefault(int(model.geom_bodyid[geom]), []).append(geom)
    if not by_body:
        raise ValueError(f"--sole-geoms {sole_geoms!r} matches no geom of the task's model")
    for geoms in by_body.values():
        corners = [_aabb_in_body(model, g) for g in geoms]
        low = np.min([c[0] for c in corners], axis=0)
        high = np.max([c[1] for c in corners], axis=0)
        first, half = geoms[0], (high - low) / 2
        model.geom_type[first] = mujoco.mjtGeom.mjGEOM_BOX
        model.geom_pos[first] = (low + high) / 2
        model.geom_quat[first] = (1.0, 0.0, 0.0, 0.0)
        model.geom_size[first] = half
        model.geom_aabb[first] = (0.0, 0.0, 0.0, *half)
        model.geom_rbound[first] = float(np.linalg.norm(half))
        for other in geoms[1:]:
            model.geom_contype[other] = 0
            model.geom_conaffinity[other] = 0
    return model


def _sole_geoms(cfg: Any, given: str | None) -> str:
    """``--sole-geoms``, else the geoms of the task's ``foot_friction`` event."""
    if given:
        return given
    event = make_env_cfg(cfg).events.get("foot_friction")
    if event is None:
        raise ValueError("box_soles: the task has no foot_friction event naming its soles; give --sole-geoms")
    return str(event.params["geom_names"][0])


def _backend(cfg: Any, changes: dict[str, Any], sole_geoms: str | None = None) -> simcore.SimBackend:
    """The variant's bare backend (`trainrt.runner.bench.physics_backend`), its options set; ``changes`` with
    ``model="box_soles"`` builds the task's scene model with box soles (``sole_geoms``: see ``_sole_geoms``)."""
    changes = dict(changes)
    options = changes.pop("options", {})
    if changes.pop("model", None) == "box_soles":
        env_cfg = make_env_cfg(cfg)
        terrain = (
            None if env_cfg.scene.terrain is None else TerrainScene(env_cfg.scene.terrain, cfg.training.seed)
        )
        changes["model"] = box_soles(scene_model(env_cfg.scene, terrain)[0], _sole_geoms(cfg, sole_geoms))
    # every variant starts from copies of the same states
    backend = physics_backend(cfg, require=(simcore.Capability.STATE_TENSORS,), **changes)
    for name, value in options.items():
        backend.set_option(name, value)
    return backend


def saved_states(
    backend: simcore.SimBackend, stir_steps: int, seed: int
) -> dict[str, dict[str, torch.Tensor]]:
    """``{"standing", "stumbling"}``: copies of the backend's state tensors (see the module docstring)."""
    gen = torch.Generator(device=backend.device).manual_seed(seed)
    default_targets = backend.ctrl.clone()  # the default pose (physics_backend)
    backend.forward()
    states = {"standing": {k: v.clone() for k, v in backend.state_tensors().items()}}
    for _ in range(stir_steps):
        noise = torch.rand(backend.ctrl.shape, generator=gen, device=backend.device, dtype=backend.ctrl.dtype)
        backend.ctrl.copy_(default_targets + 1.2 * (noise - 0.5))
        backend.step()
    states["stumbling"] = {k: v.clone() for k, v in backend.state_tensors().items()}
    return states


def collected_state(cfg: Any, steps: int, seed: int) -> dict[str, torch.Tensor]:
    """The task env's state tensors after ``steps`` control steps of uniform random actions (auto-resets
    included), built from the same scene and ``SimConfig`` defaults as the ``default`` variant."""
    env = build_env(cfg)
    env.reset()
    gen = torch.Generator(device=env.device).manual_seed(seed)
    action = torch.empty(env.num_envs, env.num_actions, device=env.device)
    for _ in range(steps):
        env.step(action.uniform_(-1.0, 1.0, generator=gen))
    return {k: v.clone() for k, v in env.backend.state_tensors().items()}


def restore(backend: simcore.SimBackend, state: dict[str, torch.Tensor]) -> None:
    """Copy a saved state into ``backend``'s state tensors, in place (captured graphs stay valid)."""
    for name, tensor in backend.state_tensors().items():
        tensor.copy_(state[name])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--task", default="g1_motion_tracking", help="whose scene (model, decimation, buffers)"
    )
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument(
        "--steps", type=int, default=200, help="control steps timed per variant, state, round"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stir-steps", type=int, default=25)
    parser.add_argument(
        "--collected-steps",
        type=int,
        default=0,
        help="also time from the task env's state after this many random-action steps (0: no)",
    )
    parser.add_argument(
        "--variants",
        default=",".join(DEFAULT_VARIANTS),
        help=f"comma-separated names, the first the reference; of {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--sole-geoms",
        default=None,
        help="box_soles: regex of the sole geoms (default: the task's foot_friction's)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variants {unknown}; valid: {sorted(VARIANTS)}")
    cfg, _ = resolve_train_config("sac", args.task, args.sim, [f"algo.num_envs={args.num_envs}"], "auto")
    k = cfg.training.collector_steps_per_replay
    if args.steps % k:
        parser.error(f"--steps must be a multiple of K={k}")
    backends = {name: _backend(cfg, VARIANTS[name], args.sole_geoms) for name in names}
    states = saved_states(backends[names[0]], args.stir_steps, args.seed)
    if args.collected_steps > 0:
        states["collected"] = collected_state(cfg, args.collected_steps, args.seed)
    works = {}
    for name, backend in backends.items():
        restore(backend, states["standing"])
        works[name] = simcore.CapturedWork(backend.step, backend=backend, name="physics", steps_per_replay=k)
        works[name].capture()
    device = torch.device(backends[names[0]].device)
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {s: {n: [] for n in names} for s in states}
    for round_index in range(args.rounds):
        for state_name, state in states.items():
            for name in names:
                restore(backends[name], state)
                seconds = simcore.wall_seconds(works[name].replay, args.steps // k, device)
                diag = backends[name].diagnostics()
                run = {
                    "ms_per_step": 1e3 * seconds / args.steps,
                    "solver_iterations": diag.solver_iterations,
                    "contacts_per_world": diag.contacts / diag.num_envs,
                    "graph_enabled": diag.graph_enabled,
                    "conditional_nodes_used": diag.conditional_nodes_used,
                }
                runs[state_name][name].append(run)
                print(
                    f"round {round_index + 1} {state_name:>9} {name:>22}: {run['ms_per_step']:.3f} ms per "
                    f"control step, solver iterations mean {diag.solver_iterations['mean']:.2f} max "
                    f"{diag.solver_iterations['max']:.0f}, {run['contacts_per_world']:.1f} contacts per world",
                    flush=True,
                )
    medians = {s: {n: statistics.median(r["ms_per_step"] for r in runs[s][n]) for n in names} for s in states}
    summary = {
        "diagnostic": True,
        "task": args.task,
        "num_envs": args.num_envs,
        "steps": args.steps,
        "steps_per_replay": k,
        "rounds": args.rounds,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "median_ms_per_step": medians,
        "over_default": {s: {n: medians[s][n] / medians[s][names[0]] for n in names} for s in states},
        "runs": runs,
    }
    for state_name in states:
        for name in names:
            print(
                f"{state_name:>9} {name:>22}: {medians[state_name][name]:.3f} ms "
                f"({summary['over_default'][state_name][name]:.3f}x {names[0]})"
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=2)
    return summary


if __name__ == "__main__":
    main(sys.argv[1:])
