"""Videos of a policy in its env and of motion clips on the training model.

``record_policy_video`` steps an env with the deterministic policy and draws chosen envs every few control
steps: a camera follows each robot, the walking task shows its commanded velocity (green arrow) beside the
measured one (blue), the tracking task a translucent ghost of the reference pose and a label with the clip,
its frame and time. Envs are tiled into one video or written one file each. ``record_clip_video`` draws a
motion file after the loader's joint mapping and forward kinematics. Frames show the robot's visual meshes
and the task's terrain (``trainrt.viz.visual``). States are read from the env's backend (``backend.qpos``)
at the drawn steps only.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainrt.hotpath import cold_path
from trainrt.runner.play import load_run_policy
from trainrt.viz.render import draw_caption, make_renderer, tile_frames
from trainrt.viz.scene import (
    COMMAND_RGBA,
    VELOCITY_RGBA,
    FollowCamera,
    GeomBatch,
    arrow_geoms,
)
from trainrt.viz.video import VideoWriter
from trainrt.viz.visual import poser_for

DEFAULT_VIDEO_FPS = 25.0


@dataclass(frozen=True)
class VideoOptions:
    """How a video is made.

    Attributes:
        width, height: pixels of one env's view (even numbers).
        seconds: simulated seconds recorded.
        fps: target frames per second (the env is drawn every ``round(control rate / fps)`` steps).
        renderer: one of ``trainrt.viz.render.RENDERER_CHOICES``.
        env_ids: which envs to draw.
        tiled: one video with the envs in a grid (else one file per env, ``<stem>_env<i>.mp4``).
        camera: the follow camera.
        ghost_offset: where the tracking ghost stands relative to the reference pose (3,) m; zero overlays it.
    """

    width: int = 320
    height: int = 240
    seconds: float = 10.0
    fps: float = DEFAULT_VIDEO_FPS
    renderer: str = "auto"
    env_ids: tuple[int, ...] = (0,)
    tiled: bool = True
    camera: FollowCamera = field(default_factory=FollowCamera)
    ghost_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass
class VideoResult:
    """What was written: paths, frame count and rate, frame size, renderer, seconds spent."""

    paths: list[str]
    frames: int
    fps: float
    width: int
    height: int
    renderer: str
    time_sec: float
    preview: list[np.ndarray] = field(default_factory=list, repr=False)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready facts (without the preview frames)."""
        return {
            "paths": self.paths,
            "frames": self.frames,
            "fps": self.fps,
            "width": self.width,
            "height": self.height,
            "renderer": self.renderer,
            "time_sec": round(self.time_sec, 3),
        }


def _yaw_rotation(quat_wxyz: np.ndarray) -> np.ndarray:
    """The heading-only rotation (3, 3) of a unit quaternion (4,) wxyz."""
    w, x, y, z = quat_wxyz
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class EnvFrames:
    """Draws the envs ``env_ids`` of a ``ManagerBasedRlEnv`` as they are now (one image per env).

    Finds the env's command terms by what they carry: a velocity command (``vel_command_b``) gets arrows,
    a motion command (``clip`` and ``frame``) a ghost of the reference pose.
    """

    @cold_path
    def __init__(self, env: Any, options: VideoOptions) -> None:
        self.env, self.options = env, options
        for i in options.env_ids:
            if not 0 <= i < env.num_envs:
                raise ValueError(f"env id {i} is out of range: the env has {env.num_envs} envs")
        self.poser = poser_for(env.backend.mj_model)
        self.renderer = make_renderer(
            self.poser, options.width, options.height, options.camera, options.renderer
        )
        self.velocity_term: Any = None
        self.motion_term: Any = None
        for name in getattr(env.cfg, "commands", {}) or {}:
            term = env.command_manager.get_term(name)
            if hasattr(term, "vel_command_b") and self.velocity_term is None:
                self.velocity_term = term
            if hasattr(term, "clip") and hasattr(term, "frame") and self.motion_term is None:
                self.motion_term = term
        self._ids = torch.tensor(options.env_ids, dtype=torch.long, device=env.device)

    @cold_path
    def draw(self, step: int) -> list[np.ndarray]:
        """One image (height, width, 3) per drawn env of the current state; reads the device (cold path)."""
        env, ids = self.env, self._ids
        reads = {"qpos": env.backend.qpos[ids], "lin_vel": env.robot.root_lin_vel_w[ids]}
        if self.velocity_term is not None:
            reads["command"] = self.velocity_term.vel_command_b[ids]
        if self.motion_term is not None:
            clip, frame = self.motion_term.clip, self.motion_term.frame[ids]
            reads.update(
                ref_root_pos=clip.root_pos_w[frame],
                ref_root_quat=clip.root_quat_w[frame],
                ref_joint_pos=clip.joint_pos[frame],
                frame=frame,
            )
        host = {k: v.detach().double().cpu().numpy() for k, v in reads.items()}
        images = []
        for row, env_id in enumerate(self.options.env_ids):
            qpos = self.poser.render_qpos(host["qpos"][row])
            root = self.poser.root_position(qpos)
            extra = GeomBatch.empty()
            ghost = None
            caption = [f"env {env_id}  t {step * env.step_dt:5.2f}s"]
            if "command" in host:
                a = self.poser.root_qpos_address
                heading = _yaw_rotation(qpos[a + 3 : a + 7]) if a is not None else np.eye(3)
                cmd = host["command"][row]
                start = root + np.array([0.0, 0.0, 0.15])
                extra = extra.concat(
                    arrow_geoms(start, heading @ np.array([cmd[0], cmd[1], 0.0]), COMMAND_RGBA)
                )
                vel = host["lin_vel"][row]
                extra = extra.concat(arrow_geoms(start, np.array([vel[0], vel[1], 0.0]), VELOCITY_RGBA))
                caption.append(f"command vx {cmd[0]:+.2f} vy {cmd[1]:+.2f} wz {cmd[2]:+.2f} (green)")
                caption.append(f"measured vx {vel[0]:+.2f} vy {vel[1]:+.2f} (blue, world)")
            if "frame" in host:
                ghost = self.poser.qpos_from_pose(
                    host["ref_root_pos"][row] + np.asarray(self.options.ghost_offset),
                    host["ref_root_quat"][row],
                    self.motion_term.clip.joint_names,
                    host["ref_joint_pos"][row],
                )
                frame, clip = int(host["frame"][row]), self.motion_term.clip
                caption.append(
                    f"{Path(self.motion_term.motion_file).name}  frame {frame}/{self.motion_term.num_frames}"
                    f"  t {frame / clip.fps:.2f}s (ghost)"
                )
            scene = self.poser.scene(
                qpos,
                camera=self.options.camera,
                ghost_qpos=ghost,
                extra=extra,
                caption=caption,
                render_space=True,
            )
            images.append(draw_caption(self.renderer.render(scene), scene.caption))
        return images

    def close(self) -> None:
        """Release the renderer."""
        self.renderer.close()


def _video_paths(path: Path, options: VideoOptions) -> list[Path]:
    if options.tiled:
        return [path]
    return [path.with_name(f"{path.stem}_env{i}{path.suffix or '.mp4'}") for i in options.env_ids]


def _frame_count(seconds: float, fps: float) -> int:
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"video seconds must be positive, got {seconds}")
    return max(1, round(seconds * fps))


@cold_path
@torch.no_grad()
def record_policy_video(
    env: Any, agent: Any, path: str | os.PathLike, options: VideoOptions, *, keep_preview: int = 0
) -> VideoResult:
    """Reset ``env``, roll out ``agent.act(obs, deterministic=True)`` and write the video(s) at ``path``.

    The video rate is the control rate divided by a whole number of steps per frame (close to
    ``options.fps``); ``seconds * rate`` frames are written. ``keep_preview`` frames (evenly spaced, of the
    first video) are kept in the result for a TensorBoard GIF.
    """
    started = time.perf_counter()
    control_rate = 1.0 / env.step_dt
    steps_per_frame = max(1, round(control_rate / options.fps))
    fps = control_rate / steps_per_frame
    num_frames = _frame_count(options.seconds, fps)
    frames = EnvFrames(env, options)
    paths = _video_paths(Path(path), options)
    preview_every = max(1, num_frames // keep_preview) if keep_preview else 0
    preview: list[np.ndarray] = []
    obs = env.reset()
    cells = len(options.env_ids)
    cols = math.ceil(math.sqrt(cells)) if options.tiled else 1
    rows = math.ceil(cells / cols) if options.tiled else 1
    writers = [VideoWriter(p, options.width * cols, options.height * rows, fps) for p in paths]
    try:
        step = 0
        for index in range(num_frames):
            images = frames.draw(step)
            outputs = [tile_frames(images)] if options.tiled else images
            for writer, image in zip(writers, outputs):
                writer.append(image)
            if preview_every and index % preview_every == 0 and len(preview) < keep_preview:
                preview.append(outputs[0])
            for _ in range(steps_per_frame):
                obs = env.step(agent.act(obs, deterministic=True)).obs
                step += 1
    finally:
        for writer in writers:
            writer.close()
        frames.close()
    return VideoResult(
        [str(p) for p in paths],
        num_frames,
        fps,
        writers[0].width,
        writers[0].height,
        frames.renderer.name,
        time.perf_counter() - started,
        preview,
    )


@cold_path
def record_clip_video(
    clip_path: str | os.PathLike,
    path: str | os.PathLike,
    options: VideoOptions,
    *,
    model: Any = None,
) -> VideoResult:
    """Draw a motion file on the training model (default: the G1) at ``options.fps``; at most ``seconds``.

    The clip goes through ``trainrt.motion.load_motion`` (joint mapping by name, resampling to the video
    rate, forward kinematics), so the video shows what a tracking task would track. A clip shorter than two
    frames at the video rate is drawn at its own rate instead (the tracking task takes it at its control rate).
    """
    from trainrt.motion import load_motion, read_motion_arrays
    from trainrt.motion.loader import motion_fps
    from trainrt.robots import G1

    started = time.perf_counter()
    model = model if model is not None else G1.model()
    arrays = read_motion_arrays(clip_path)
    fps = _clip_video_rate(arrays, options.fps)
    clip = load_motion(arrays, model, target_fps=fps, dtype=torch.float64)
    num_frames = min(clip.num_frames, _frame_count(options.seconds, fps))
    poser = poser_for(model)
    source_fps, source_frames = motion_fps(arrays), len(arrays["joint_pos"])
    renderer = make_renderer(poser, options.width, options.height, options.camera, options.renderer)
    root_pos, root_quat = clip.root_pos_w.numpy(), clip.root_quat_w.numpy()
    joint_pos = clip.joint_pos.numpy()
    try:
        with VideoWriter(path, options.width, options.height, fps) as writer:
            for frame in range(num_frames):
                qpos = poser.qpos_from_pose(
                    root_pos[frame], root_quat[frame], clip.joint_names, joint_pos[frame]
                )
                t = frame / clip.fps
                caption = [
                    f"{Path(clip_path).name}  clip frame {min(round(t * source_fps), source_frames - 1)}"
                    f"/{source_frames}  t {t:5.2f}s"
                ]
                scene = poser.scene(qpos, camera=options.camera, caption=caption, render_space=True)
                writer.append(draw_caption(renderer.render(scene), scene.caption))
    finally:
        renderer.close()
    return VideoResult(
        [str(path)], num_frames, fps, options.width, options.height, renderer.name,
        time.perf_counter() - started,
    )  # fmt: skip


def _clip_video_rate(arrays: dict[str, np.ndarray], wanted_fps: float) -> float:
    """``wanted_fps``, or the file's own fps when the clip lasts less than two frames at ``wanted_fps`` (a bad
    'fps' fails here as in the loader; other fields are the loader's to check)."""
    from trainrt.motion.loader import motion_fps, resampled_frame_count

    fps = motion_fps(arrays)
    frames = len(arrays.get("joint_pos", ()))
    return fps if frames >= 2 and resampled_frame_count(frames, fps, wanted_fps) < 2 else wanted_fps


@cold_path
def record_run_video(
    run_dir: str | os.PathLike,
    path: str | os.PathLike | None,
    options: VideoOptions,
    *,
    sim: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    png_frames: int = 0,
    motion_file: str | None = None,
) -> dict[str, Any]:
    """Record a run's deterministic policy (``trainrt play --video``); default path
    ``<run_dir>/videos/play_iter<N>.mp4``; ``png_frames`` evenly spaced frames of the first video also go
    beside it as ``<its stem>_frame<k>.png`` (``..._env0_frame<k>.png`` with one file per env); ``motion_file``:
    the run's clip at another place. Returns the checkpoint and video facts."""
    env, agent, facts = load_run_policy(
        run_dir, num_envs=max(options.env_ids) + 1, sim=sim, checkpoint=checkpoint, motion_file=motion_file
    )
    if path is None:
        path = Path(run_dir) / "videos" / f"play_iter{facts['iteration']}.mp4"
    result = record_policy_video(env, agent, path, options, keep_preview=png_frames)
    pictures = save_frames(result.preview, Path(result.paths[0]))  # the first video's frames, named after it
    return {**facts, **result.as_dict(), "png_frames": pictures}


@cold_path
def save_frames(frames: list[np.ndarray], video_path: Path) -> list[str]:
    """Write ``frames`` (height, width, 3) uint8 as ``<video stem>_frame<k>.png`` beside the video."""
    from PIL import Image

    paths = []
    for k, frame in enumerate(frames):
        target = video_path.with_name(f"{video_path.stem}_frame{k}.png")
        Image.fromarray(frame).save(target)
        paths.append(str(target))
    return paths
