"""``trainrt report``: the series it prepares and the lines and bars it draws, from runs with known values."""

from __future__ import annotations

import json
import math

import pytest

from trainrt.viz.report import REPORT_FILES, write_report
from trainrt.viz.report.data import (
    metric_series,
    read_run,
    recent_means,
    reward_series,
    smooth,
    termination_series,
    throughput_series,
)
from trainrt.viz.report.draw import pyplot
from trainrt.viz.report.evaluation import eval_figure
from trainrt.viz.report.training import (
    episode_figure,
    losses_figure,
    metrics_figure,
    rewards_figure,
    terminations_figure,
)

STEPS = list(range(2, 42, 2))  # a log point every other iteration, 20 in all
LENGTH = [10.0 + s for s in STEPS]
REW_ALIVE = [0.5 * s for s in STEPS]
REW_TORQUE = [-0.1 * s for s in STEPS]
TERM_TIME_OUT = [0.25] * len(STEPS)
TERM_FELL = [0.75] * len(STEPS)
LIN_VEL_ERROR = [1.0 / s for s in STEPS]


def _write_scalars(run_dir, scalars: dict[str, list[float]], steps=STEPS) -> None:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"))
    for tag, values in scalars.items():
        for step, value in zip(steps, values):
            writer.add_scalar(tag, value, step)
    writer.close()


@pytest.fixture
def run_dir(tmp_path):
    """A run directory with a synthetic metrics log (the tags a walk run writes) and a summary."""
    _write_scalars(
        tmp_path,
        {
            "Train/mean_episode_length": LENGTH,
            "Episode/length": LENGTH,  # the env counts the same episodes: drawn once, not twice
            "Train/mean_reward": [a + t for a, t in zip(REW_ALIVE, REW_TORQUE)],
            "Train/num_episodes": [4.0] * len(STEPS),
            "Episode/num_finished": [4.0] * len(STEPS),
            "Episode/rew_alive": REW_ALIVE,
            "Episode/rew_joint_torques_l2": REW_TORQUE,
            "Episode/term_time_out": TERM_TIME_OUT,
            "Episode/term_fell_over": TERM_FELL,
            "Metrics/lin_vel_error_xy": LIN_VEL_ERROR,
            "Metrics/root_height": [0.7] * len(STEPS),
            "Loss/critic_loss": [100.0 / s**2 for s in STEPS],  # 25 down to 0.0625
            "Loss/actor_loss": [-0.01 * s for s in STEPS],
        },
    )
    iterations = [
        {"iteration": i, "env_steps": 64, "wall_time_sec": 0.1 * (1 + i % 2), "collect_time_sec": 0.06,
         "learn_time_sec": 0.03}
        for i in range(1, 41)
    ]  # fmt: skip
    summary = {"algo": "sac", "task": "g1_walk_flat", "num_envs": 8, "iterations": iterations,
               "tail_env_steps_per_sec": 500.0}  # fmt: skip
    (tmp_path / "run_summary.json").write_text(json.dumps(summary))
    return tmp_path


def _lines(axis):
    return [(list(line.get_xdata()), list(line.get_ydata())) for line in axis.get_lines()]


def test_smooth_is_a_trailing_mean_that_skips_non_finite_values():
    assert smooth([1.0, 2.0, 3.0, 4.0], 2) == [1.0, 1.5, 2.5, 3.5]
    assert smooth([1.0, math.nan, 3.0], 2) == [1.0, 1.0, 3.0]
    assert smooth([2.0] * 40) == [2.0] * 40  # default window 2 (a twentieth of the points)


def test_a_report_writes_every_training_picture_and_says_why_eval_is_missing(run_dir):
    lines = []
    written = write_report(run_dir, log=lines.append)
    assert [p.name for p in written] == [n for n in REPORT_FILES if n != "eval.png"]
    assert all(p.parent == run_dir / "report" and p.stat().st_size > 10_000 for p in written)
    assert lines == [
        "eval.png not written: no trainrt eval results in eval/ (run `trainrt eval RUN_DIR` first)"
    ]


def test_episode_length_is_drawn_once_raw_and_smoothed(run_dir):
    plt = pyplot()
    figure = episode_figure(plt, read_run(run_dir))
    length, ret = figure.axes
    (raw_x, raw_y), (smooth_x, smooth_y) = _lines(length)  # one curve: its raw trace and its trailing mean
    assert raw_x == smooth_x == STEPS and raw_y == pytest.approx(LENGTH)
    assert smooth_y == pytest.approx(smooth(LENGTH))
    assert length.get_lines()[0].get_alpha() < 0.5 and length.get_lines()[1].get_alpha() is None
    assert _lines(ret)[0][1] == pytest.approx([a + t for a, t in zip(REW_ALIVE, REW_TORQUE)])
    assert "64 env steps each" in length.get_xlabel()
    plt.close(figure)


def test_reward_terms_sum_to_the_total_and_the_shares_rank_by_size(run_dir):
    run = read_run(run_dir)
    total, terms = reward_series(run.scalars)
    assert [t.label for t in terms] == ["alive", "joint_torques_l2"]
    assert total.x == STEPS and total.y == pytest.approx([a + t for a, t in zip(REW_ALIVE, REW_TORQUE)])
    assert recent_means(terms) == [
        ("alive", pytest.approx(0.5 * (38 + 40) / 2)),  # the last 2 of 20 points
        ("joint_torques_l2", pytest.approx(-0.1 * (38 + 40) / 2)),
    ]
    plt = pyplot()
    figure = rewards_figure(plt, run)
    total_axis, shares, alive, torque = figure.axes[:4]
    assert _lines(total_axis)[0][1] == pytest.approx(total.y)
    assert sorted(p.get_width() for p in shares.patches) == pytest.approx([-3.9, 19.5])
    assert (alive.get_title(), torque.get_title()) == ("alive", "joint_torques_l2")
    assert _lines(torque)[0][1] == pytest.approx(REW_TORQUE)
    plt.close(figure)


def test_task_metrics_come_with_units_errors_first(run_dir):
    run = read_run(run_dir)
    assert [s.label for s in metric_series(run.scalars)] == ["lin_vel_error_xy (m/s)", "root_height (m)"]
    plt = pyplot()
    figure = metrics_figure(plt, run)
    assert figure.axes[0].get_title() == "lin_vel_error_xy (m/s)"
    assert _lines(figure.axes[0])[0][1] == pytest.approx(LIN_VEL_ERROR)
    plt.close(figure)


def test_terminations_draw_each_terms_fraction_and_the_episode_counts(run_dir):
    run = read_run(run_dir)
    terms, finished = termination_series(run.scalars)
    assert [t.label for t in terms] == ["fell_over", "time_out"]
    plt = pyplot()
    figure = terminations_figure(plt, run)
    why, count = figure.axes
    assert [t.get_text() for t in why.get_legend().get_texts()] == ["fell_over", "time_out"]
    raw = [y for _, y in _lines(why)[::2]]
    assert raw == [pytest.approx(TERM_FELL), pytest.approx(TERM_TIME_OUT)]
    assert [p.get_height() for p in count.patches] == [4.0] * len(STEPS) and finished.x == STEPS
    plt.close(figure)


def test_losses_spanning_decades_get_a_log_axis(run_dir):
    plt = pyplot()
    figure = losses_figure(plt, read_run(run_dir))
    actor, critic = figure.axes
    assert (actor.get_title(), actor.get_yscale()) == ("actor_loss", "linear")  # negative values: linear
    assert (critic.get_title(), critic.get_yscale()) == ("critic_loss", "log")
    plt.close(figure)


def test_throughput_comes_from_every_iterations_timing(run_dir):
    run = read_run(run_dir)
    curves = throughput_series(run.summary, run.scalars)
    assert curves["rate"].y[:2] == pytest.approx([64 / 0.2, 64 / 0.1])
    assert curves["steps"].y[-1] == 40 * 64 and curves["steps"].x[-1] == pytest.approx(0.1 * 60)
    assert curves["collect"].y == [0.06] * 40


def test_a_run_with_only_losses_writes_losses_and_notes_the_rest(tmp_path):
    _write_scalars(tmp_path, {"Loss/critic_loss": [1.0, 0.5, 0.25]}, steps=[1, 2, 3])
    lines = []
    written = write_report(tmp_path, log=lines.append)
    assert [p.name for p in written] == ["losses.png"]
    assert "episode.png not written: no episode has ended yet" in lines[0]
    assert lines[1] == "rewards.png not written: no episode has ended yet (no Episode/rew_* scalars)"
    assert lines[2].startswith("metrics.png not written: the run logged no task metrics")
    assert lines[3] == "terminations.png not written: no episode has ended yet (no Episode/term_* scalars)"
    assert lines[4].startswith("throughput.png not written: no iteration timings")
    assert lines[5].startswith("eval.png not written: no trainrt eval results")


def test_a_directory_without_scalars_or_timings_has_nothing_to_plot(tmp_path):
    with pytest.raises(ValueError, match="nothing to plot"):
        write_report(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        write_report(tmp_path / "missing")


def _walk_eval(iteration: int, fell: float) -> dict:
    commands = {
        "stand": {"command": {"lin_vel_x": 0.0, "lin_vel_y": 0.0, "ang_vel_z": 0.0}, "failed_fraction": fell,
                  "lin_vel_error_xy": 0.1, "ang_vel_error_z": 0.2, "mean_lin_vel_x": 0.05,
                  "mean_lin_vel_y": -0.02, "mean_ang_vel_z": 0.01},
        "forward_0.5": {"command": {"lin_vel_x": 0.5, "lin_vel_y": 0.0, "ang_vel_z": 0.0}, "failed_fraction": 0.0,
                        "lin_vel_error_xy": 0.3, "ang_vel_error_z": 0.4, "mean_lin_vel_x": 0.4,
                        "mean_lin_vel_y": 0.0, "mean_ang_vel_z": -0.1},
    }  # fmt: skip
    return {"algo": "sac", "task": "g1_walk_flat", "sim": "mujoco", "iteration": iteration, "horizon_s": 10.0,
            "commands": commands}  # fmt: skip


def test_walk_evaluations_are_bars_per_command_newest_last(run_dir):
    (run_dir / "eval").mkdir()
    for iteration, fell in ((100, 0.5), (200, 0.25)):
        (run_dir / "eval" / f"eval_{iteration}.json").write_text(json.dumps(_walk_eval(iteration, fell)))
    (run_dir / "eval" / "eval_300.json").write_text("{")  # truncated: noted, left out
    run = read_run(run_dir)
    assert [label for label, _ in run.evals] == ["iteration 100", "iteration 200"]
    assert run.notes[0].startswith(f"{run_dir / 'eval' / 'eval_300.json'}: unreadable evaluation")
    plt = pyplot()
    figure = eval_figure(plt, run)
    fell, lin, yaw, achieved = figure.axes
    assert [t.get_text() for t in fell.get_xticklabels()] == ["stand", "forward_0.5"]
    assert [p.get_height() for p in fell.patches] == [0.5, 0.0, 0.25, 0.0]  # iteration 100's, then 200's
    assert [t.get_text() for t in fell.get_legend().get_texts()] == ["iteration 100", "iteration 200"]
    assert [p.get_height() for p in lin.patches] == [0.1, 0.3, 0.1, 0.3]
    assert [p.get_height() for p in yaw.patches] == [0.2, 0.4, 0.2, 0.4]
    # the newest's achieved vx, vy, wz per command, and the commanded values as markers
    assert [round(p.get_height(), 3) for p in achieved.patches] == [0.05, 0.4, -0.02, 0.0, 0.01, -0.1]
    commanded = achieved.collections[0].get_offsets()[:, 1].tolist()
    assert commanded == [0.0, 0.5]
    plt.close(figure)


def test_tracking_evaluations_draw_each_clip_second(run_dir):
    per_second = {"t_s": [0.0, 1.0, 2.0], "running_fraction": [1.0, 0.75, 0.5],
                  "body_pos_error": [0.05, 0.1, None], "anchor_pos_error": [0.02, 0.03, 0.04],
                  "anchor_ori_error": [0.1, 0.2, 0.3], "joint_pos_error": [1.0, 1.5, 2.0]}  # fmt: skip
    tracking = {"completed_fraction": 0.5, "failed_fraction": 0.5, "body_pos_error": 0.07,
                "anchor_pos_error": 0.03, "anchor_ori_error": 0.2, "joint_pos_error": 1.5,
                "per_second": per_second}  # fmt: skip
    result = {"algo": "flashsac", "task": "g1_motion_tracking", "sim": "mujoco", "iteration": 7,
              "clip": {"motion_file": "/clips/dance.npz", "num_frames": 125, "fps": 50.0}, "tracking": tracking}  # fmt: skip
    (run_dir / "eval").mkdir()
    (run_dir / "eval" / "eval_7.json").write_text(json.dumps(result))
    plt = pyplot()
    figure = eval_figure(plt, read_run(run_dir))
    running, positions, angles, whole = figure.axes
    assert "dance.npz (2.5 s)" in figure._suptitle.get_text()
    assert _lines(running)[0] == ([0.0, 1.0, 2.0, 2.5], [1.0, 0.75, 0.5, 0.5])
    body_x, body_y = _lines(positions)[0]
    assert body_x == [0.5, 1.5, 2.25] and body_y[:2] == [0.05, 0.1] and math.isnan(body_y[2])
    assert [t.get_text() for t in angles.get_legend().get_texts()] == [
        "anchor_ori_error (rad)",
        "joint_pos_error (rad)",
    ]
    assert [p.get_height() for p in whole.patches] == [0.07, 0.03, 0.2, 1.5]
    assert running.get_title().endswith("whole clip: completed 0.50, fell 0.50")
    plt.close(figure)


def test_a_resumed_runs_repeated_log_point_keeps_the_newest_value(tmp_path):
    from trainrt.viz.report import read_scalars

    _write_scalars(tmp_path, {"Loss/critic_loss": [1.0, 1.0, 1.0]}, steps=[1, 2, 3])
    _write_scalars(tmp_path, {"Loss/critic_loss": [2.0, 2.0]}, steps=[3, 4])  # resumed from iteration 2
    assert len(list((tmp_path / "tensorboard").iterdir())) == 2
    assert read_scalars(tmp_path)["Loss/critic_loss"] == [(1, 1.0), (2, 1.0), (3, 2.0), (4, 2.0)]


def test_another_tasks_scenarios_are_a_bar_per_scenario_and_metric(run_dir):
    rows = {
        name: {"failed_fraction": fell, "completed_fraction": 1 - fell, "mean_episode_length": 50.0, "steps": 50,
               "horizon_steps": 50, "num_envs": 4, "graph_enabled": False, "reach_error": err,
               "per_second": {"t_s": [0.0]}}
        for name, fell, err in (("near", 0.0, 0.01), ("far", 0.5, 0.2))
    }  # fmt: skip
    result = {"algo": "sac", "task": "arm_reach", "sim": "mujoco", "iteration": 3, "scenarios": rows}
    (run_dir / "eval").mkdir()
    (run_dir / "eval" / "eval_3.json").write_text(json.dumps(result))
    plt = pyplot()
    figure = eval_figure(plt, read_run(run_dir))
    fell, reach = figure.axes  # bookkeeping keys and per-second results get no panel
    assert (fell.get_title(), reach.get_title()) == ("fell (fraction of envs)", "reach_error")
    assert [p.get_height() for p in reach.patches] == [0.01, 0.2]
    assert [t.get_text() for t in reach.get_xticklabels()] == ["near", "far"]
    plt.close(figure)
