"""The tracking task's command: ``MotionCommand`` (the reference clip on the device, a frame per row, adaptive
start sampling, reset to the reference state) and how its clip file is found (``resolve_motion_file`` among the
asset clips of the robots a model is, ``robots_driving``). The terms that read it are ``tracking.mdp``'s.

Any robot: the clip's joints are mapped onto the robot's by name (``load_motion(strict_names=True)``; the
loader's docstring says what a clip must name), the tracked bodies and the anchor are params.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from trainrt.compiled import where_into
from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED, CommandTerm, CommandTermCfg
from trainrt.mdp.events import range_bounds
from trainrt.mdp.math import (
    quat_apply,
    quat_apply_inverse,
    quat_conjugate,
    quat_from_euler_xyz,
    quat_mul,
    quat_normalize,
    yaw_quat,
)
from trainrt.mdp.state_layout import robot_state_layout
from trainrt.motion import MotionClip, load_motion
from trainrt.robots import ROBOTS, RobotDescription

if TYPE_CHECKING:
    import mujoco

    from trainrt.envs import ManagerBasedRlEnv


@cold_path
def robots_driving(model: mujoco.MjModel) -> tuple[RobotDescription, ...]:
    """The robots of ``trainrt.robots.ROBOTS`` whose joints (in actuator order) ``model``'s actuators drive:
    whose asset clips a clip name (or no clip, the default one) given for ``model`` refers to."""
    import mujoco

    driven = tuple(
        mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[i, 0])
        for i in range(model.nu)
    )
    return tuple(robot for robot in ROBOTS.values() if robot.joint_names == driven)


@cold_path
def resolve_motion_file(
    motion_file: str | Path | None, robots: tuple[RobotDescription, ...] | None = None
) -> Path:
    """An existing clip path: ``motion_file`` as given, or a file name among the asset clips of ``robots``
    (default: every robot of ``trainrt.robots.ROBOTS``), or, for None, the first of their default clips
    (``RobotDescription.default_motion``). FileNotFoundError naming the clips there otherwise."""
    robots = tuple(ROBOTS.values()) if robots is None else robots
    if motion_file is None:
        named = [robot for robot in robots if robot.default_motion is not None]
        if not named:
            robot_names = [robot.name for robot in robots]
            raise FileNotFoundError(
                f"no motion file given and no robot of {robot_names} names a default clip "
                "(RobotDescription.default_motion); give the clip's path"
            )
        robots, motion_file = named[:1], named[0].default_motion
    path = Path(motion_file)
    if path.is_file():
        return path
    available = []
    for robot in robots:
        if robot.motions is None:
            continue
        robot.mjcf_path()  # FileNotFoundError naming the fetch command when the robot's assets are not fetched
        candidate = robot.motions_dir() / path.name
        if path.parent == Path(".") and candidate.is_file():
            return candidate
        available.append(f"{robot.name.upper()} asset clips: {[p.name for p in robot.motion_files()]}")
    known = "; ".join(available) or "no robot of this model has asset clips: give the clip's path"
    raise FileNotFoundError(f"motion file {str(motion_file)!r} not found ({known})")


class MotionCommand(CommandTerm):
    """The reference motion: clip on the device, a frame index per row, adaptive start-frame sampling.

    The command is the reference joint positions and velocities at the row's frame (num_envs, 2 J). Each
    step advances every row by one frame (the clip is resampled to the control rate at load). A row that
    resets starts at a frame sampled from the start-time distribution and is placed in the reference state
    of that frame plus perturbations, written into the env's reset payload (the env applies it).

    Adaptive sampling: the clip is cut into bins of ``bin_duration_s``; failures (non-time-out terminations)
    are counted per bin of the failing frame and smoothed over time with ``adaptive_alpha`` per step. A bin is
    drawn with probability proportional to ``(failure_rate + adaptive_uniform_ratio / num_bins)`` smoothed
    by a kernel ``adaptive_lambda ** k`` over the ``adaptive_kernel_size`` bins that follow it, so starts land
    shortly before where episodes fail; the start frame is uniform within the bin. All on device, sync-free.
    The kernel spans 3 bins by default (a failure also raises the start odds of the two bins before it);
    whole_body_tracking's public config spans 1 (the failing bin alone). The default stays at 3 until a
    learning evaluation compares the two on our tracking task.

    Params:
        motion_file: clip path, or a file name among the asset clips of the robot the model is (the robots
            of ``trainrt.robots.ROBOTS`` that ``robots_driving`` finds); None: that robot's default clip.
        anchor_body: the anchor body name (must be among ``body_names``).
        body_names: tracked bodies; all must be in the scene's read plan, and among the clip's bodies when it
            names them.
        pose_range: ``{x, y, z, roll, pitch, yaw}`` perturbation of the reset root pose.
        velocity_range: ``{x, y, z, roll, pitch, yaw}`` perturbation of the reset root velocity (world).
        joint_position_range: ``(low, high)`` perturbation of the reset joint positions (rad).
        bin_duration_s, adaptive_kernel_size, adaptive_lambda, adaptive_uniform_ratio, adaptive_alpha:
            the adaptive sampler (see above).
        start_frame: every reset starts at this frame instead of a sampled one (e.g. 0 for an evaluation
            from the clip's start); None: the adaptive sampler.
    """

    PARAMS: ClassVar[dict[str, Any]] = {
        "motion_file": None,
        "anchor_body": REQUIRED,
        "body_names": (),
        "pose_range": {},
        "velocity_range": {},
        "joint_position_range": (0.0, 0.0),
        "bin_duration_s": 1.0,
        "adaptive_kernel_size": 3,
        "adaptive_lambda": 0.8,
        "adaptive_uniform_ratio": 0.1,
        "adaptive_alpha": 0.001,
        "start_frame": None,
    }

    @cold_path
    def __init__(self, cfg: CommandTermCfg, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        p = self.params
        body_names = tuple(p["body_names"])
        if p["anchor_body"] not in body_names:
            raise ValueError(
                f"MotionCommand: anchor_body {p['anchor_body']!r} must be one of body_names {body_names}"
            )
        model = env.backend.mj_model
        self.motion_file = resolve_motion_file(p["motion_file"], robots_driving(model))
        self.clip: MotionClip = load_motion(
            self.motion_file,
            model,
            body_names=body_names,
            target_fps=1.0 / env.step_dt,
            device=env.device,
            dtype=torch.float32,
            strict_names=True,
        )
        if tuple(self.clip.joint_names) != tuple(env.robot.joint_names):
            raise ValueError("MotionCommand: clip joints differ from the robot's joints")
        self.body_names = body_names
        self.anchor_index = body_names.index(p["anchor_body"])
        self.robot_body_ids = torch.tensor(
            env.robot.body_ids(body_names), dtype=torch.long, device=env.device
        )
        self.robot_anchor_id = int(env.robot.body_ids(p["anchor_body"])[0])
        self.layout = robot_state_layout(env)

        self.pose_bounds = range_bounds("MotionCommand", p["pose_range"], env.device)
        self.velocity_bounds = range_bounds("MotionCommand", p["velocity_range"], env.device)
        low, high = (float(v) for v in p["joint_position_range"])
        if not low <= high:
            raise ValueError(
                f"MotionCommand: joint_position_range must be (low, high), got {p['joint_position_range']}"
            )
        self._joint_offset = (low, high)
        limits = env.robot.joint_pos_limits
        self._joint_lower, self._joint_upper = limits[:, 0], limits[:, 1]

        n, dev = env.num_envs, env.device
        self.num_frames = self.clip.num_frames
        start = p["start_frame"]
        if start is not None and not (isinstance(start, int) and 0 <= start <= self.num_frames - 2):
            raise ValueError(
                f"MotionCommand: start_frame must be None or an int in [0, {self.num_frames - 2}], got {start!r}"
            )
        self._fixed_start = None if start is None else torch.full((n,), start, dtype=torch.long, device=dev)
        self.frame_dt = env.step_dt
        """Seconds between clip frames: the clip is resampled to the control rate at load."""
        self.frame = torch.zeros(n, dtype=torch.long, device=dev)
        """Current reference frame of each row (num_envs,) long."""

        self.num_bins = max(1, math.ceil(self.clip.duration_s / float(p["bin_duration_s"])))
        size = int(p["adaptive_kernel_size"])
        if size < 1:
            raise ValueError(f"MotionCommand: adaptive_kernel_size must be >= 1, got {size}")
        kernel = torch.tensor([float(p["adaptive_lambda"]) ** k for k in range(size)], device=dev)
        self._kernel = kernel / kernel.sum()
        self._uniform_ratio = float(p["adaptive_uniform_ratio"])
        self._alpha = float(p["adaptive_alpha"])
        self.bin_failure_rate = torch.zeros(self.num_bins, device=dev)
        """Smoothed failures per bin (num_bins,): the adaptive sampler's statistics."""
        self._bin_failures_now = torch.zeros(self.num_bins, device=dev)
        self.sampling_probabilities = torch.full((self.num_bins,), 1.0 / self.num_bins, device=dev)
        """Start-bin distribution of the latest reset (num_bins,)."""
        # Normalized entropy: H / log(num_bins); a single bin is uniform by definition.
        self._entropy_scale = 1.0 / math.log(self.num_bins) if self.num_bins > 1 else 0.0
        self._entropy_offset = 0.0 if self.num_bins > 1 else 1.0
        self.sampling_entropy = torch.ones((), device=dev)
        """Normalized entropy of ``sampling_probabilities`` (1 = uniform), a device scalar."""
        self._draw = torch.zeros(n, 2, device=dev)
        self._perturb = torch.zeros(n, 12, device=dev)
        self._joint_draw = torch.zeros(n, self.clip.joint_pos.shape[1], device=dev)
        self._build_reset_tables()

    @cold_path
    def _build_reset_tables(self) -> None:
        """Per-frame reset state in one table and the perturbation bounds side by side.

        A reset then gathers the frame's state once (instead of once per quantity) and maps all 12
        perturbation draws with one multiply and one add; the floats are those of the per-quantity reads.
        Columns: root position (3), root quaternion (4), joint positions (J), root linear and angular
        velocity (6, world frame), joint velocities (J), the order of a floating base's qpos and qvel.
        """
        clip, lay = self.clip, self.layout
        self._reset_table = torch.cat(
            (
                clip.root_pos_w,
                clip.root_quat_w,
                clip.joint_pos,
                clip.root_lin_vel_w,
                clip.root_ang_vel_w,
                clip.joint_vel,
            ),
            dim=1,
        )
        bounds = torch.cat((self.pose_bounds, self.velocity_bounds), dim=1)
        self._perturb_low, self._perturb_span = bounds[0], bounds[1] - bounds[0]
        # When the root and the joints are adjacent in qpos and in qvel (a floating base first, as MuJoCo
        # orders a G1), each payload takes one select over its whole block.
        j = clip.joint_pos.shape[1]
        adjacent = (
            isinstance(lay.joint_pos, slice)
            and isinstance(lay.joint_vel, slice)
            and lay.root_quat.start == lay.root_pos.stop
            and lay.joint_pos.start == lay.root_quat.stop
            and lay.root_ang_vel.start == lay.root_lin_vel.stop
            and lay.joint_vel.start == lay.root_ang_vel.stop
        )
        self._payload_blocks = (
            (
                slice(lay.root_pos.start, lay.root_pos.start + 7 + j),
                slice(lay.root_lin_vel.start, lay.root_lin_vel.start + 6 + j),
            )
            if adjacent
            else None
        )

    # --- reference at the current frame ------------------------------------------------------------------------
    # Several observations, rewards, terminations and metrics read the same reference and robot quantities in
    # one step; they are memoized in the env's state cache for one version of the state. The command manager
    # bumps the version after this term's math (which moves the frame), the env after physics and resets, so
    # no read sees an old frame (and outside the env's step and reset every read recomputes).

    def _memo(self, name: str, compute: Any) -> Any:
        return self.env.state_cache.get((id(self), name), compute)

    @property
    def command(self) -> torch.Tensor:
        """Reference joint positions and velocities (num_envs, 2 J)."""
        return self._memo("command", lambda: torch.cat((self.ref_joint_pos, self.ref_joint_vel), dim=1))

    @property
    def ref_joint_pos(self) -> torch.Tensor:
        """Reference joint positions (num_envs, J)."""
        return self._memo("ref_joint_pos", lambda: self.clip.joint_pos[self.frame])

    @property
    def ref_joint_vel(self) -> torch.Tensor:
        """Reference joint velocities (num_envs, J)."""
        return self._memo("ref_joint_vel", lambda: self.clip.joint_vel[self.frame])

    @property
    def ref_body_pos_w(self) -> torch.Tensor:
        """Reference positions of the tracked bodies, world frame (num_envs, B, 3)."""
        return self._memo("ref_body_pos_w", lambda: self.clip.body_pos_w[self.frame])

    @property
    def ref_body_quat_w(self) -> torch.Tensor:
        """Reference orientations of the tracked bodies, wxyz (num_envs, B, 4)."""
        return self._memo("ref_body_quat_w", lambda: self.clip.body_quat_w[self.frame])

    @property
    def ref_body_lin_vel_w(self) -> torch.Tensor:
        """Reference linear velocities of the tracked bodies, world frame (num_envs, B, 3)."""
        return self._memo("ref_body_lin_vel_w", lambda: self.clip.body_lin_vel_w[self.frame])

    @property
    def ref_body_ang_vel_w(self) -> torch.Tensor:
        """Reference angular velocities of the tracked bodies, world frame (num_envs, B, 3)."""
        return self._memo("ref_body_ang_vel_w", lambda: self.clip.body_ang_vel_w[self.frame])

    @property
    def ref_anchor_pos_w(self) -> torch.Tensor:
        """Reference anchor position (num_envs, 3)."""
        return self._memo("ref_anchor_pos_w", lambda: self.clip.body_pos_w[self.frame, self.anchor_index])

    @property
    def ref_anchor_quat_w(self) -> torch.Tensor:
        """Reference anchor orientation, wxyz (num_envs, 4)."""
        return self._memo("ref_anchor_quat_w", lambda: self.clip.body_quat_w[self.frame, self.anchor_index])

    # --- the robot ------------------------------------------------------------------------------------------------

    @property
    def robot_body_pos_w(self) -> torch.Tensor:
        """Robot positions of the tracked bodies (num_envs, B, 3)."""
        return self._memo("robot_body_pos_w", lambda: self.env.robot.body_pos_w[:, self.robot_body_ids])

    @property
    def robot_body_quat_w(self) -> torch.Tensor:
        """Robot orientations of the tracked bodies, wxyz (num_envs, B, 4)."""
        return self.env.robot.body_quat_w[:, self.robot_body_ids]

    @property
    def robot_body_lin_vel_w(self) -> torch.Tensor:
        """Robot linear velocities of the tracked bodies, world frame (num_envs, B, 3)."""
        return self._memo(
            "robot_body_lin_vel_w", lambda: self.env.robot.body_lin_vel_w[:, self.robot_body_ids]
        )

    @property
    def robot_body_ang_vel_w(self) -> torch.Tensor:
        """Robot angular velocities of the tracked bodies, world frame (num_envs, B, 3)."""
        return self._memo(
            "robot_body_ang_vel_w", lambda: self.env.robot.body_ang_vel_w[:, self.robot_body_ids]
        )

    @property
    def robot_anchor_pos_w(self) -> torch.Tensor:
        """Robot anchor position (num_envs, 3)."""
        return self.env.robot.body_pos_w[:, self.robot_anchor_id]

    @property
    def robot_anchor_quat_w(self) -> torch.Tensor:
        """Robot anchor orientation, wxyz (num_envs, 4)."""
        return self.env.robot.body_quat_w[:, self.robot_anchor_id]

    def relative_body_targets(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference body poses moved onto the robot anchor: positions (num_envs, B, 3), quats (num_envs, B, 4).

        Rotated by the anchors' yaw difference about the reference anchor, then translated so the reference
        anchor sits at the robot anchor's x, y and the reference anchor's height.
        """
        return self._memo("relative_body_targets", self._relative_body_targets)

    def _relative_body_targets(self) -> tuple[torch.Tensor, torch.Tensor]:
        ref_anchor_pos, ref_anchor_quat = self.ref_anchor_pos_w, self.ref_anchor_quat_w
        robot_anchor_pos = self.robot_anchor_pos_w
        delta_yaw = yaw_quat(quat_mul(self.robot_anchor_quat_w, quat_conjugate(ref_anchor_quat))).unsqueeze(1)
        origin = torch.cat((robot_anchor_pos[:, :2], ref_anchor_pos[:, 2:]), dim=1).unsqueeze(1)
        pos = origin + quat_apply(delta_yaw, self.ref_body_pos_w - ref_anchor_pos.unsqueeze(1))
        quat = quat_mul(delta_yaw.expand(-1, len(self.body_names), -1), self.ref_body_quat_w)
        return pos, quat

    # --- lifecycle -------------------------------------------------------------------------------------------------

    def draw_compute_(self, generator: torch.Generator) -> None:
        """A step draws nothing: the clip sets the pace, there is no resampling timer."""

    def apply_compute(self, dt: float) -> None:
        """Advance every row by ``dt`` (one frame of ``frame_dt``) and update the failure statistics.

        The clip sets the pace (no resampling timer); a ``dt`` other than ``frame_dt`` is refused rather than
        silently treated as one frame.
        """
        if abs(dt - self.frame_dt) > 1e-9 * self.frame_dt:  # plain floats: no device work
            raise ValueError(
                f"MotionCommand: the clip advances in frames of {self.frame_dt} s (the env's control step), "
                f"got dt={dt}; resample the clip to that rate or step with step_dt"
            )
        self._update()

    def _update(self) -> None:
        self.frame.add_(1).clamp_(max=self.num_frames - 1)
        self.bin_failure_rate.mul_(1.0 - self._alpha).add_(self._bin_failures_now, alpha=self._alpha)
        self._bin_failures_now.zero_()

    def _frame_bins(self) -> torch.Tensor:
        return torch.clamp(self.frame * self.num_bins // self.num_frames, 0, self.num_bins - 1)

    def _draw_(self, generator: torch.Generator) -> None:
        """Draw, for every row, the start frame's bin and offset (adaptive sampler only), then the root and joint
        perturbations."""
        if self._fixed_start is None:
            self._draw.uniform_(0.0, 1.0, generator=generator)
        self._perturb.uniform_(0.0, 1.0, generator=generator)
        self._joint_draw.uniform_(self._joint_offset[0], self._joint_offset[1], generator=generator)

    def _resample_drawn(self, env_mask: torch.Tensor) -> None:
        """Rows where ``env_mask`` (num_envs,) is True: record failures, sample start frames, fill the payload."""
        env = self.env
        # env.terminated excludes non-finite rows (a blown-up world is not the clip's fault) and is
        # cleared by a full reset(), so a failure is counted once
        failed = env.terminated & env_mask
        self._bin_failures_now.scatter_add_(0, self._frame_bins(), failed.to(torch.float32))
        start = self._sample_start_frames() if self._fixed_start is None else self._fixed_start
        torch.where(env_mask, start, self.frame, out=self.frame)
        self._write_reset_state(env_mask)

    def _sample_start_frames(self) -> torch.Tensor:
        """Start frames for every row (num_envs,) from the adaptive bin distribution, uniform within the bin
        (from the numbers `_draw_` drew)."""
        weights = self.bin_failure_rate + self._uniform_ratio / self.num_bins
        size = self._kernel.shape[0]
        padded = torch.cat((weights, weights[-1:].expand(size - 1)))
        smoothed = padded.unfold(0, size, 1) @ self._kernel
        probabilities = torch.div(smoothed, smoothed.sum(), out=self.sampling_probabilities)
        # -(s) * c equals s * (-c) exactly; the sums are written straight into the persistent buffers.
        plogp_sum = (probabilities * torch.log(probabilities.clamp_min(1e-12))).sum()
        torch.add(plogp_sum * -self._entropy_scale, self._entropy_offset, out=self.sampling_entropy)
        cdf = torch.cumsum(probabilities, dim=0)
        bins = torch.searchsorted(cdf, (self._draw[:, 0] * cdf[-1]).contiguous(), right=True)
        bins = bins.clamp_(max=self.num_bins - 1)
        # long + float32 promotes the bin index to float32 inside the add, as .to(torch.float32) did.
        start = ((bins + self._draw[:, 1]) * ((self.num_frames - 1) / self.num_bins)).long()
        # At least one step must remain before the clip's last frame.
        return start.clamp_(0, self.num_frames - 2)

    def _write_reset_state(self, env_mask: torch.Tensor) -> None:
        """The reference state at each row's frame plus the drawn perturbations, into the reset payload's
        masked rows."""
        env, clip, lay = self.env, self.clip, self.layout
        qpos, qvel = env.reset_payload["qpos"], env.reset_payload["qvel"]
        perturb = self._perturb_low + self._perturb_span * self._perturb
        pose, vel = perturb[:, :6], perturb[:, 6:]
        j = clip.joint_pos.shape[1]
        ref = self._reset_table[self.frame]  # (num_envs, 13 + 2 J), columns as in _build_reset_tables
        root_pos = ref[:, 0:3] + pose[:, :3]
        delta = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
        root_quat = quat_normalize(quat_mul(delta, ref[:, 3:7]))
        root_vel = ref[:, 7 + j : 13 + j] + vel  # linear and angular, world frame
        root_lin_vel = root_vel[:, :3]
        root_ang_vel_b = quat_apply_inverse(root_quat, root_vel[:, 3:])
        joint_pos = torch.clamp(ref[:, 7 : 7 + j] + self._joint_draw, self._joint_lower, self._joint_upper)
        joint_vel = ref[:, 13 + j :]
        rows = env_mask.unsqueeze(1)
        if self._payload_blocks is not None:
            # One select per payload over its whole block (float32 widens exactly into a float64 payload).
            qpos_block, qvel_block = self._payload_blocks
            qpos_value = torch.cat((root_pos, root_quat, joint_pos), dim=1)
            qvel_value = torch.cat((root_lin_vel, root_ang_vel_b, joint_vel), dim=1)
            where_into(rows, qpos_value, qpos[:, qpos_block])
            where_into(rows, qvel_value, qvel[:, qvel_block])
            return
        for target, cols, value in (
            (qpos, lay.root_pos, root_pos),
            (qpos, lay.root_quat, root_quat),
            (qpos, lay.joint_pos, joint_pos),
            (qvel, lay.root_lin_vel, root_lin_vel),
            (qvel, lay.root_ang_vel, root_ang_vel_b),
            (qvel, lay.joint_vel, joint_vel),
        ):
            target[:, cols] = torch.where(rows, value.to(target.dtype), target[:, cols])
