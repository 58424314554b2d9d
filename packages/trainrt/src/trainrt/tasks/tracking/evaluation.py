"""The tracking evaluation: every row starts at the clip's first frame without perturbation and runs to its end.

Pushes off, no random start, no episode limit. Completion fraction (rows that reached the last frame), and
mean body position, anchor position and orientation, and joint position errors over the steps the rows
were tracking; the same for each second of the clip (``per_second``), with the fraction of rows still tracking.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainrt.hotpath import cold_path
from trainrt.runner.evaluation_spec import NEVER_S, EvalScenario, EvaluationSpec, with_task_changes


@cold_path
def tracking_eval_config(cfg: Any) -> Any:
    """The run config with every reset at the clip's first frame, unperturbed, pushes off, no episode limit."""
    axes = ("x", "y", "z", "roll", "pitch", "yaw")
    motion = {
        "params": {
            "start_frame": 0,
            "pose_range": {axis: [0.0, 0.0] for axis in axes},
            "velocity_range": {axis: [0.0, 0.0] for axis in axes},
            "joint_position_range": [0.0, 0.0],
        }
    }
    changes = {"commands": {"motion": motion}, "events": {"push_robot": {"enabled": False}}}
    return with_task_changes(cfg, changes, episode_length_s=NEVER_S)


def _clip_frames(env: Any, options: Mapping[str, Any]) -> int:
    # terminations see the frame reached by the previous step, so the last frame ends step num_frames
    return env.command_manager.get_term("motion").num_frames


def _result(env: Any, horizon: int, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    motion = env.command_manager.get_term("motion")
    clip = {"motion_file": str(motion.motion_file), "num_frames": motion.num_frames, "fps": motion.clip.fps}
    return {"clip": clip, "tracking": rows["clip"]}


def tracking_evaluation() -> EvaluationSpec:
    """The ``EvaluationSpec`` of the tracking task (any robot): one scenario, the whole clip."""
    from trainrt.tasks.tracking import mdp as tracking

    return EvaluationSpec(
        config=tracking_eval_config,
        scenarios=(EvalScenario("clip"),),
        metrics={
            name: (lambda env, func=func: func(env, command_name="motion"))
            for name, func in (
                ("body_pos_error", tracking.body_pos_error),
                ("anchor_pos_error", tracking.anchor_pos_error),
                ("anchor_ori_error", tracking.anchor_ori_error),
                ("joint_pos_error", tracking.joint_pos_error),
            )
        },
        horizon=_clip_frames,
        result=_result,
        per_second=True,
    )
