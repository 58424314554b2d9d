"""The training console without an env: numbers, the progress line (terminal and plain), the ETA, the block."""

import io
import math

import pytest
from rich.console import Console

from trainrt.runner.console import (
    Progress,
    format_iteration_block,
    format_number,
    format_progress_line,
)
from trainrt.runner.progress import ProgressDisplay, SmoothedEta, terminal_console, terminal_printer

PROGRESS = Progress(
    title="sac g1_walk_flat",
    iteration=50,
    max_iterations=200,
    env_steps_per_sec=2048.4,
    elapsed_sec=75.0,
    eta_sec=125.0,
    episode_length=68.25,
    episode_return=-1.5,
)

EPISODE = {
    "Train/num_episodes": 12.0,
    "Train/mean_reward": -1.5,
    "Train/mean_episode_length": 1000.0,
    "Episode/num_finished": 12.0,
    "Episode/length": 1000.0,
    "Episode/rew_alive": 0.1,
    "Episode/term_time_out": 0.75,
    "Episode/term_fell_over": 0.25,
    "Metrics/lin_vel_error_xy": 0.41234,
    "Metrics/ang_vel_error_z": 0.2,
    "Diagnostics/nonfinite_resets": 0.0,
}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000.0, "1,000"),
        (2048.0, "2,048"),
        (0.0, "0"),
        (-31.5841, "-31.58"),
        (9.31524, "9.315"),
        (0.0162, "0.0162"),
        (12345.6, "12,346"),
        (0.00012345, "1.234e-04"),
        (math.nan, "nan"),
    ],
)
def test_counts_print_as_integers_and_other_values_with_four_significant_digits(value, text):
    assert format_number(value) == text


def test_the_progress_line_says_where_the_run_is_in_one_line():
    line = format_progress_line(PROGRESS)
    assert line == (
        "[#####---------------]  50/200  25.0%  ETA 2m05s  ep_len 68.2  return -1.5  2,048 steps/s  "
        "elapsed 1m15s  sac g1_walk_flat"
    )
    unknown = Progress("sac t", 0, 10, 0.0, 1.0, math.inf, eta_by_time_limit=False)
    assert format_progress_line(unknown) == "[--------------------]  0/10   0.0%  ETA -  elapsed 1.0s  sac t"
    by_time = Progress("sac t", 3, 10, 5.0, 1.0, 30.0, eta_by_time_limit=True)
    assert "ETA 30.0s (time limit)" in format_progress_line(by_time)


def test_the_block_lists_episodes_task_metrics_terminations_then_losses_and_time():
    block = format_iteration_block(
        PROGRESS,
        episode=EPISODE,
        losses={"critic_loss": 9.3152, "alpha": 0.001},
        iteration_sec=0.151,
        collect_sec=0.056,
        learn_sec=0.095,
        total_env_steps=40960,
    )
    lines = block.splitlines()
    assert lines[0].startswith(
        "-- sac g1_walk_flat  iteration 50/200  2,048 env steps/s  elapsed 1m15s  ETA 2m05s"
    )
    assert lines[1:] == [
        "episodes   12 finished  length 1,000  return -1.5",
        "metrics    lin_vel_error_xy 0.4123  ang_vel_error_z 0.2",
        "ended by   time_out 75%  fell_over 25%",
        "losses     critic_loss 9.315  alpha 0.001",
        "time       0.151s/it (collect 0.056s, learn 0.095s)  40,960 env steps",
    ]
    assert "1000.0" not in block and "12.0" not in block  # counts are integers
    assert "rew_alive" not in block  # per-term rewards are in TensorBoard and the report


def test_a_long_row_wraps_under_its_values():
    losses = {f"loss_number_{i}": 1.5 for i in range(8)}
    block = format_iteration_block(
        PROGRESS,
        episode={},
        losses=losses,
        iteration_sec=1.0,
        collect_sec=0.5,
        learn_sec=0.5,
        total_env_steps=1,
    )
    rows = [row for row in block.splitlines() if row.startswith(("losses", "    "))]
    assert len(rows) >= 3 and all(len(row) <= 80 for row in rows)
    assert all(row.startswith(" " * 11 + "loss_number_") for row in rows[1:])
    assert sum(row.count("loss_number_") for row in rows) == 8


def test_an_episode_row_notes_non_finite_resets_only_when_there_were_some():
    block = format_iteration_block(
        PROGRESS,
        episode={"Episode/num_finished": 3.0, "Diagnostics/nonfinite_resets": 2.0},
        losses={},
        iteration_sec=1.0,
        collect_sec=0.5,
        learn_sec=0.5,
        total_env_steps=1,
    )
    assert "episodes   3 finished  blown-up resets 2 in all" in block.splitlines()


def test_the_eta_is_the_smoothed_time_per_iteration_times_what_is_left():
    eta = SmoothedEta(max_iterations=100, time_limit_sec=None, weight=0.5)
    assert eta.eta(0, 0.0) == (math.inf, False)
    eta.start(10.0, 0)
    eta.iteration_ended(1, 14.0)  # a slow first iteration: 4 s
    eta.iteration_ended(2, 16.0)  # 2 s: the mean of the first two, 3 s
    assert eta.sec_per_iteration == pytest.approx(3.0)
    eta.iteration_ended(2, 99.0)  # the same iteration again changes nothing
    eta.iteration_ended(3, 17.0)  # 1 s: moving average 3 + 0.5 * (1 - 3) = 2
    assert eta.sec_per_iteration == pytest.approx(2.0)
    assert eta.iterations_per_sec == pytest.approx(0.5)
    assert eta.eta(3, 7.0) == (pytest.approx(97 * 2.0), False)
    eta.iteration_ended(5, 21.0)  # two iterations in 4 s: one sample of 2 s
    assert eta.sec_per_iteration == pytest.approx(2.0)
    assert eta.eta(100, 50.0) == (0.0, False)


def test_the_eta_is_of_the_time_limit_when_it_ends_the_run_first():
    eta = SmoothedEta(max_iterations=1000, time_limit_sec=600.0)
    assert eta.eta(0, 100.0) == (500.0, True)  # no iteration timed yet: the limit is the only bound
    eta.start(0.0, 0)
    eta.iteration_ended(1, 1.0)
    assert eta.eta(1, 100.0) == (500.0, True)  # 999 iterations of 1 s end after the limit
    fast = SmoothedEta(max_iterations=10, time_limit_sec=600.0)
    fast.start(0.0, 0)
    fast.iteration_ended(1, 1.0)
    assert fast.eta(1, 100.0) == (pytest.approx(9.0), False)


def test_a_resumed_run_times_its_first_iteration_from_the_session_start():
    eta = SmoothedEta(max_iterations=100, time_limit_sec=None)
    eta.start(50.0, 40)
    eta.iteration_ended(41, 52.0)
    assert eta.eta(41, 0.0) == (pytest.approx(59 * 2.0), False)


def test_without_a_terminal_plain_lines_come_at_most_every_so_often_and_not_after_a_block():
    lines: list[str] = []
    now = [0.0]
    display = ProgressDisplay(lines.append, None, clock=lambda: now[0], plain_every_sec=10.0)
    display.show("it 1", block_printed=True)  # the block said it
    now[0] = 5.0
    display.show("it 2", block_printed=False)  # 5 s after the block
    now[0] = 10.0
    display.show("it 3", block_printed=False)
    now[0] = 15.0
    display.show("it 4", block_printed=False)
    now[0] = 21.0
    display.show("it 5", block_printed=False)
    display.close()
    assert lines == ["it 3", "it 5"]
    assert not any("\r" in line or "\x1b" in line for line in lines)


def test_on_a_terminal_the_line_is_redrawn_in_place_under_the_printed_lines():
    stream = io.StringIO()
    console = Console(file=stream, force_terminal=True, width=120, color_system=None)
    logged: list[str] = []
    display = ProgressDisplay(logged.append, console)
    printer = terminal_printer(console)
    display.show("[##--] 1/4 ETA 3.0s", block_printed=True)
    printer("-- a block line that is longer than nothing")
    display.show("[###-] 2/4 ETA 2.0s", block_printed=False)
    display.close()
    display.close()  # idempotent
    out = stream.getvalue()
    assert logged == []  # nothing goes through the plain log on a terminal
    assert "[##--] 1/4 ETA 3.0s" in out and "[###-] 2/4 ETA 2.0s" in out
    assert "-- a block line that is longer than nothing\n" in out
    assert "\r" in out and "\x1b[2K" in out  # the line is erased and redrawn, not appended
    assert out.index("1/4") < out.index("-- a block line") < out.rindex("2/4")


def test_a_file_or_pipe_is_not_a_terminal():
    assert terminal_console(io.StringIO()) is None
