"""``trainrt play --viewer``: MuJoCo's interactive viewer showing env 0 driven by the policy.

Walking task keys: arrow up/down change the forward speed, left/right the yaw rate, page up/down the
lateral speed, space stops (the command then stays what the keys set, instead of the task's resampling).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

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

    env, agent, facts = load_run_policy(
        run_dir, num_envs=1, sim=sim, checkpoint=checkpoint, motion_file=motion_file
    )
    model = env.backend.mj_model
    data = mujoco.MjData(model)
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
        while view.is_running():
            started = time.perf_counter()
            obs = env.step(agent.act(obs, deterministic=True)).obs
            if velocity is not None and keys.command is not None:
                velocity.vel_command_b[0] = torch.as_tensor(keys.command, dtype=velocity.vel_command_b.dtype)
                velocity.is_heading_env[0] = False
                velocity.is_standing_env[0] = False
            with view.lock():
                data.qpos[:] = env.backend.qpos[0].double().cpu().numpy()
                mujoco.mj_forward(model, data)
            view.sync()
            time.sleep(max(0.0, env.step_dt - (time.perf_counter() - started)))
