"""`benchmarks/learning_curve.py` end to end on the CPU: a time-limited tiny run, then evals of its checkpoints."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import FLASHSAC_TINY, TINY

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_curve.py"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "task", "metrics"),
    [
        (
            "sac",
            "g1_walk_flat",
            {
                "worst_fell",
                "mean_lin_vel_error",
                "worst_lin_vel_error",
                "mean_yaw_rate_error",
                "action_saturation",
            },
        ),
        (
            "flashsac",
            "g1_motion_tracking",
            {"completed_fraction", "failed_fraction", "body_pos_error", "action_saturation"},
        ),
    ],
    ids=["walk", "tracking"],
)
def test_a_curve_row_per_evaluated_checkpoint(tmp_path, algo, task, metrics):
    out = tmp_path / "curve.json"
    # TINY's max_iterations is overridden by the script's own (a run ends only at the time limit)
    extra = [o for o in TINY if not o.startswith(("algo.max_iterations=", "training."))]
    if algo == "flashsac":
        extra += FLASHSAC_TINY
    command = [
        sys.executable, str(SCRIPT), f"--algo={algo}", f"--task={task}", "--sim=mujoco", "--preset=cpu-demo",
        "--minutes=0.25", "--checkpoint-every=2", "--evals=2", "--eval-envs=2",
        f"--run-dir={tmp_path / 'run'}", f"--out={out}", *extra,
    ]  # fmt: skip
    if algo == "sac":
        command.append("--warmup")  # a single run's warm-up goes beside its run directory, not into it
        # and the last checkpoint checked under another solver limit than the preset's 5 (docs/perf/tuning/0022)
        command += ["--check-solver-iterations=7", "--check-envs=1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    if algo == "sac":
        assert not (tmp_path / "run" / "_warmup").exists()
        assert (tmp_path / "run_warmup").is_dir() and not (tmp_path / "run_warmup" / "run").exists()
        assert "warm-up (one iteration of every arm" in result.stdout
    curve = json.loads(out.read_text())
    rows = curve["rows"]
    last = curve["completed_iterations"]
    if algo == "sac":
        check_row, check_eval = rows.pop(), curve["evals"][-1]
        assert (check_row["iteration"], check_row["eval_on"]) == (last, "7 solver iterations")
        assert (check_eval["solver_iterations"], check_eval["trained_solver_iterations"]) == (7, 5)
        assert check_eval["sim"] == "mujoco" and curve["check"]["num_envs"] == 1
        assert [row["eval_on"] for row in rows] == ["run", "run"] and metrics <= set(check_row)
        assert (tmp_path / "run" / "eval" / f"check_{last}.json").is_file()
    assert len(rows) == 2 and len(curve["evals"]) == 2 + (algo == "sac")
    assert rows[-1]["iteration"] == last  # the last checkpoint is always evaluated
    assert rows[0]["iteration"] < last and rows[0]["iteration"] % 2 == 0
    assert curve["time_limit_reached"]
    # the run ended after the first iteration past the 15 s budget (tiny CPU iterations take well under 1 s)
    assert 0 < rows[0]["wall_clock_s"] < 15.0 <= rows[1]["wall_clock_s"] < 20.0
    assert metrics <= set(rows[0])
    assert "| iteration | wall_clock_s |" in result.stdout
    # the raised max_iterations does not stretch FlashSAC's cosine: it keeps the preset's horizon
    # (cpu-demo: 500 iterations x 4 updates); so does the SAC walk's, whose rates decay too
    params = json.loads((tmp_path / "run" / "config.json").read_text())["algo"]["params"]
    assert params["lr_schedule"] == "warmup_cosine" and params["lr_decay_updates"] == 500 * 4


def _run_arms(run_dir: Path, out: Path, minutes: float, *flags: str) -> subprocess.CompletedProcess:
    """A tiny SAC walk A/B on the CPU: one eval per arm; ``flags`` give the arms and the mode."""
    extra = [o for o in TINY if not o.startswith(("algo.max_iterations=", "training."))]
    command = [
        sys.executable, str(SCRIPT), "--algo=sac", "--task=g1_walk_flat", "--sim=mujoco", "--preset=cpu-demo",
        f"--minutes={minutes}", "--checkpoint-every=2", "--evals=1", "--eval-envs=2", f"--run-dir={run_dir}",
        f"--out={out}", *flags, *extra,
    ]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_arms_train_at_once_with_their_own_overrides_and_share_one_table(tmp_path):
    out = tmp_path / "ab.json"
    flags = ["--warmup", "--arm", "base=", "--arm", "fast_actor=algo.params.actor_lr=0.001"]
    result = _run_arms(tmp_path / "ab", out, 0.2, *flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    ab = json.loads(out.read_text())
    arms = ab["concurrent_arms"]
    assert list(arms) == ["base", "fast_actor"]
    # --warmup ran each arm's config for one iteration first, then removed those runs (not their logs)
    scratch = tmp_path / "ab" / "_warmup"
    assert ab["warmup_sec"] > 0 and "warm-up (one iteration of every arm" in result.stdout
    for name in ("base", "fast_actor"):
        assert not (scratch / name).exists()
        log = (scratch / f"{name}.log").read_text()
        assert f"run directory: {(scratch / name).resolve()}" in log and "1/1" in log
    assert (
        arms["fast_actor"]["overrides"] == ["algo.params.actor_lr=0.001"] and arms["base"]["overrides"] == []
    )
    for name, lr in (("base", 3e-4), ("fast_actor", 1e-3)):
        run_dir = Path(arms[name]["run_dir"])
        assert run_dir == tmp_path / "ab" / name
        config = json.loads((run_dir / "config.json").read_text())
        assert config["algo"]["params"]["actor_lr"] == pytest.approx(lr)
        assert arms[name]["time_limit_reached"]
        # each arm's console is its own file, not interleaved with the other's
        log = (tmp_path / "ab" / f"{name}.log").read_text()
        assert f"run directory: {run_dir.resolve()}" in log
        assert f"run directory: {run_dir.resolve()}" not in result.stdout
        other = "fast_actor" if name == "base" else "base"
        assert f"run directory: {(tmp_path / 'ab' / other).resolve()}" not in log
        (row,) = arms[name]["rows"]
        assert row["iteration"] == arms[name]["completed_iterations"]
    assert "| arm | iteration | wall_clock_s |" in result.stdout
    assert "| base |" in result.stdout and "| fast_actor |" in result.stdout


@pytest.mark.slow
def test_one_at_a_time_runs_each_arm_alone_after_the_previous(tmp_path):
    out = tmp_path / "seq.json"
    flags = ["--one-at-a-time", "--arm", "first=", "--arm", "second=algo.params.actor_lr=0.001"]
    result = _run_arms(tmp_path / "seq", out, 0.1, *flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    arms = json.loads(out.read_text())["sequential_arms"]
    assert list(arms) == ["first", "second"]
    first, second = (Path(arms[name]["run_dir"]) for name in ("first", "second"))
    # the second run started (wrote its config) only after the first had written its final summary
    assert (second / "config.json").stat().st_mtime_ns >= (first / "run_summary.json").stat().st_mtime_ns
    assert all(arms[name]["time_limit_reached"] for name in arms)
    assert json.loads((second / "config.json").read_text())["algo"]["params"]["actor_lr"] == pytest.approx(
        1e-3
    )


def test_one_at_a_time_needs_arms(tmp_path):
    command = [sys.executable, str(SCRIPT), "--sim=mujoco", f"--run-dir={tmp_path / 'x'}", "--one-at-a-time"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "give at least one --arm" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["no_equals", "=algo.params.actor_lr=1", "bad name=x=1"])
def test_a_malformed_arm_is_refused_before_anything_runs(tmp_path, spec):
    command = [sys.executable, str(SCRIPT), "--sim=mujoco", f"--run-dir={tmp_path / 'x'}", "--arm", spec]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2
    assert "--arm" in result.stderr and "NAME=" in result.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_an_arm_named_twice_is_refused(tmp_path):
    command = [sys.executable, str(SCRIPT), "--sim=mujoco", "--arm", "a=", "--arm", "a=x=1"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "given twice" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "message"),
    [("--check-solver-iterations=0", "--check-solver-iterations must be at least 1"),
     ("--check-envs=0", "--check-envs must be at least 1")],
)  # fmt: skip
def test_a_bad_check_is_refused_before_anything_runs(tmp_path, flag, message):
    command = [sys.executable, str(SCRIPT), "--sim=mujoco", f"--run-dir={tmp_path / 'x'}", flag]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and message in result.stderr
    assert not (tmp_path / "x").exists()


def test_a_rough_walk_row_has_each_terrain_types_falls_and_the_flat_ground_error():
    spec = importlib.util.spec_from_file_location("learning_curve", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    walk = {"failed_fraction": 0.0, "lin_vel_error_xy": 0.1, "ang_vel_error_z": 0.2, "action_saturation": 0.0}
    result = {
        "terrain": {
            "flat": {"level": 5, "failed_fraction": 0.0},
            "stairs_up": {"level": 5, "failed_fraction": 0.25},
        },
        "flat_lin_vel_error_xy": 0.1,
        "commands": {
            "flat/forward_0.5": walk,
            "stairs_up/forward_0.5": {**walk, "failed_fraction": 0.5, "lin_vel_error_xy": 0.3},
        },
    }
    row = script.headline(result)
    assert (row["fell_flat"], row["fell_stairs_up"], row["flat_lin_vel_error"]) == (0.0, 0.25, 0.1)
    assert row["worst_fell"] == 0.5 and row["worst_lin_vel_error"] == 0.3
    assert row["mean_lin_vel_error"] == pytest.approx(0.2) and row["mean_yaw_rate_error"] == pytest.approx(
        0.2
    )
    flat_only = script.headline({"commands": {"forward_0.5": walk}})  # the flat walk: no terrain columns
    assert set(flat_only) == {
        "worst_fell", "mean_lin_vel_error", "worst_lin_vel_error", "mean_yaw_rate_error", "action_saturation"
    }  # fmt: skip
