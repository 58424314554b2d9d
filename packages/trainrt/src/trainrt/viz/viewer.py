"""``trainrt play --viewer``: MuJoCo's interactive viewer showing env 0 driven by the policy.

The viewer shows the render model (``trainrt.viz.visual``: the robot's visual meshes and the task's terrain)
posed from the simulated state; the tracking task adds its reference pose as a translucent ghost.

Walking task keys: arrow up/down change the forward speed, left/right the yaw rate, page up/down the
lateral speed, space stops (the command then stays what the keys set, instead of the task's resampling).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainrt.hotpath import cold_path

_KEY_STEPS = {265: (0, 0.1), 264: (0, -0.1), 266: (1, 0.1), 267: (1, -0.1), 263: (2, 0.2), 262: (2, -0.2)}
_KEY_SPACE = 32


@cold_path
def display_available() -> bool:
    """Whether a window can open: a display server on Linux (``DISPLAY``/``WAYLAND_DISPLAY``), else assumed."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


class KeyboardVelocity:
    """Velocity command ``(vx, vy, wz)`` set by keys; ``None`` until the first key press."""

    def __init__(self) -> None:
        self.command: np.ndarray | None = None

    def __call__(self, keycode: int) -> None:
        if self.command is None:
            self.command = np.zeros(3)
        if keycode == _KEY_SPACE:
            self.command[:] = 0.0
        elif keycode in _KEY_STEPS:
            axis, delta = _KEY_STEPS[keycode]
            self.command[axis] = round(self.command[axis] + delta, 3)
        print(f"command vx {self.command[0]:+.2f} vy {self.command[1]:+.2f} wz {self.command[2]:+.2f}")


@cold_path
@torch.no_grad()
def view_run(
    run_dir: str | os.PathLike,
    *,
    sim: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    motion_file: str | None = None,
) -> None:
    """Open the viewer on env 0 of a run's policy until the window is closed; ``RuntimeError`` without display."""
    if not display_available():
        raise RuntimeError(
            "the viewer needs a display (DISPLAY or WAYLAND_DISPLAY is not set); on a headless machine "
            f"record a video instead: trainrt play {Path(run_dir)} --video"
        )
    import mujoco.viewer

    from trainrt.viz.record import load_run_policy
    from trainrt.viz.visual import poser_for

    env, agent, facts = load_run_policy(
        run_dir, num_envs=1, sim=sim, checkpoint=checkpoint, motion_file=motion_file
    )
    poser = poser_for(env.backend.mj_model)
    model = poser.model
    data = mujoco.MjData(model)
    motion = next(
        (
            env.command_manager.get_term(n)
            for n in (env.cfg.commands or {})
            if hasattr(env.command_manager.get_term(n), "clip")
        ),
        None,
    )
    velocity = next(
        (
            env.command_manager.get_term(n)
            for n in (env.cfg.commands or {})
            if hasattr(env.command_manager.get_term(n), "vel_command_b")
        ),
        None,
    )
    keys = KeyboardVelocity()
    print(f"viewer: {facts['checkpoint']} (iteration {facts['iteration']}); close the window to stop")
    if velocity is not None:
        print("keys: up/down forward speed, left/right yaw rate, page up/down lateral speed, space stop")
    obs = env.reset()
    with mujoco.viewer.launch_passive(
        model, data, key_callback=keys if velocity is not None else None
    ) as view:
        view.opt.geomgroup[:] = poser.geomgroup
        while view.is_running():
            started = time.perf_counter()
            obs = env.step(agent.act(obs, deterministic=True)).obs
            if velocity is not None and keys.command is not None:
                velocity.vel_command_b[0] = torch.as_tensor(keys.command, dtype=velocity.vel_command_b.dtype)
                velocity.is_heading_env[0] = False
                velocity.is_standing_env[0] = False
            with view.lock():
                data.qpos[:] = poser.render_qpos(env.backend.qpos[0].double().cpu().numpy())
                mujoco.mj_forward(model, data)
                if motion is not None:
                    _draw_ghost(view, poser, motion)
            view.sync()
            time.sleep(max(0.0, env.step_dt - (time.perf_counter() - started)))


@cold_path
def _draw_ghost(view: Any, poser: Any, motion: Any) -> None:
    """Put env 0's reference pose (``motion``: the tracking command) into the viewer's user scene as the
    translucent ghost."""
    import mujoco

    frame = int(motion.frame[0])
    clip = motion.clip
    qpos = poser.qpos_from_pose(
        clip.root_pos_w[frame].double().cpu().numpy(),
        clip.root_quat_w[frame].double().cpu().numpy(),
        clip.joint_names,
        clip.joint_pos[frame].double().cpu().numpy(),
    )
    poser.ghost_data.qpos[:] = qpos
    mujoco.mj_kinematics(poser.model, poser.ghost_data)
    scene = view.user_scn
    scene.ngeom = 0
    mujoco.mjv_addGeoms(
        poser.model,
        poser.ghost_data,
        view.opt,
        mujoco.MjvPerturb(),
        int(mujoco.mjtCatBit.mjCAT_DYNAMIC),
        scene,
    )
    for i in range(scene.ngeom):
        geom = scene.geoms[i]
        geom.rgba[:] = poser.ghost_rgba[int(geom.objid)].astype(np.float32)
        geom.matid = -1
        geom.transparent = 1
