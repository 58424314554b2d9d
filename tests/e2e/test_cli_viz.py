"""CLI end to end: a tiny run with training.video_every, then `trainrt play --video`, `trainrt report`,
`trainrt motion preview/info` and `trainrt config show`, as a user runs them."""

import json
from pathlib import Path

import numpy as np
import pytest
from cli_runs import train, trainrt
from PIL import Image

from trainrt.config import resolve_train_config
from trainrt.robots import G1
from trainrt.runner.manifest import write_resolved_config
from trainrt.viz.video import read_video


@pytest.fixture(scope="module")
def tracking_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("viz") / "run"
    # a third iteration, so a video falls between iterations
    out = train(
        run_dir, "sac", "g1_motion_tracking", "mujoco",
        "training.video_every=2", "training.video_seconds=0.4", "training.video_renderer=software",
        iterations=3,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir, out.stdout


@pytest.mark.slow
def test_training_video_and_compact_lines(tracking_run):
    run_dir, stdout = tracking_run
    assert (run_dir / "videos" / "iter_000002.mp4").is_file()
    assert "outside the throughput window" in stdout
    assert "it 3/3" not in stdout and "iteration 3/3" in stdout  # the last iteration gets the full block
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert len(summary["iterations"]) == 3


@pytest.mark.slow
def test_play_video_decodes_to_the_requested_frames(tracking_run, tmp_path):
    run_dir, _ = tracking_run
    path = tmp_path / "play.mp4"
    out = trainrt(
        "play", str(run_dir), "--video", "--output", str(path), "--seconds", "2", "--width", "64",
        "--height", "48", "--renderer", "software", "--frames", "3",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout[out.stdout.index("{") :])
    frames, fps = read_video(path)
    assert frames.shape == (result["frames"], 48, 64, 3)
    assert result["frames"] == round(2 * fps)
    assert [p.rsplit("/", 1)[-1] for p in result["png_frames"]] == [f"play_frame{k}.png" for k in range(3)]
    first = np.asarray(Image.open(result["png_frames"][0]).convert("RGB")).astype(int)
    assert first.shape == (48, 64, 3)
    assert np.abs(first - frames[0].astype(int)).mean() < 12  # the PNG is the video's first frame (lossy)


@pytest.mark.slow
def test_report_writes_non_trivial_pngs(tracking_run):
    run_dir, _ = tracking_run
    evaluation = trainrt("eval", str(run_dir), "--num-envs", "1", "--steps", "5")
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    out = trainrt("report", str(run_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    written = [line.removeprefix("wrote ") for line in out.stdout.splitlines()]
    names = [Path(path).name for path in written]
    # three iterations of two envs end no episode: the pictures of episodes are left out, each said why
    for name in ("episode.png", "rewards.png", "metrics.png", "terminations.png"):
        assert name in names or f"{name} not written: " in out.stderr, (name, out.stderr)
    assert {"losses.png", "throughput.png", "eval.png"} <= set(names), out.stdout
    for path in written:
        picture = np.asarray(Image.open(path).convert("RGB"))
        assert picture.shape[0] > 150 and picture.shape[1] > 150, path
        assert picture.std() > 10, f"{path} is blank"
        assert len(np.unique(picture.reshape(-1, 3), axis=0)) > 20, f"{path} has almost no content"


def test_report_of_an_empty_directory_says_why(tmp_path):
    out = trainrt("report", str(tmp_path))
    assert out.returncode == 2 and "nothing to plot" in out.stderr


@pytest.mark.slow
def test_motion_preview_and_info_on_the_command_line(tmp_path):
    clips = [p for p in G1.motion_files() if "w_obj" not in p.name]
    if not clips:
        pytest.skip("G1 motion clips are not fetched")
    path = tmp_path / "preview.mp4"
    out = trainrt(
        "motion", "preview", str(clips[-1]), "--output", str(path), "--seconds", "2", "--width", "64",
        "--height", "48", "--renderer", "software",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert read_video(path)[0].shape == (50, 48, 64, 3)
    info = trainrt("motion", "info", str(clips[-1]))
    assert info.returncode == 0, info.stderr[-3000:]
    assert "joint limits:" in info.stdout and "action bounds:" in info.stdout and "fps" in info.stdout


@pytest.mark.slow
def test_motion_info_takes_the_name_of_a_g1_clip(tmp_path):
    clips = [p for p in G1.motion_files() if "w_obj" not in p.name]
    if not clips:
        pytest.skip("G1 motion clips are not fetched")
    assert not (Path.cwd() / clips[0].name).exists()
    info = trainrt("motion", "info", clips[0].name, "--json")
    assert info.returncode == 0, info.stderr[-3000:]
    assert json.loads(info.stdout)["clip"] == str(clips[0])


@pytest.mark.slow
def test_viewer_without_display_and_missing_renderer_fail_with_the_fix(tracking_run, monkeypatch):
    run_dir, _ = tracking_run
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    out = trainrt("play", str(run_dir), "--viewer")
    assert out.returncode == 2 and "needs a display" in out.stderr and "--video" in out.stderr


@pytest.mark.slow
def test_config_show_lists_every_key():
    out = trainrt("config", "show", "--algo", "sac", "--task", "g1_walk_flat", "training.video_every=5")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "training.video_every = 5" in out.stdout and "algo.params.batch_size = " in out.stdout
    bad = trainrt("config", "show", "training.no_such_key=1")
    assert bad.returncode == 2


@pytest.mark.slow
def test_config_show_of_a_resumed_run_takes_its_algo_and_task(tmp_path):
    cfg, _ = resolve_train_config("flashsac", "g1_motion_tracking", "mujoco", [], "cpu-demo")
    write_resolved_config(tmp_path, cfg)
    out = trainrt("config", "show", "--json", f"training.resume={tmp_path}")
    assert out.returncode == 0, out.stderr[-3000:]
    shown = json.loads(out.stdout)
    assert (shown["algo"]["name"], shown["task"]["name"]) == ("flashsac", "g1_motion_tracking")
    bad = trainrt("config", "show", "--algo", "sac", f"training.resume={tmp_path}")
    assert bad.returncode == 2 and "this command says --algo sac;" in bad.stderr


def test_report_says_which_plots_it_left_out_and_why(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    from trainrt.viz.report import write_report

    writer = SummaryWriter(log_dir=str(tmp_path / "tensorboard"))
    for step in range(3):  # updates ran, but no episode ended and none was counted
        writer.add_scalar("Loss/critic", 1.0 / (step + 1), step)
    writer.close()
    lines = []
    written = write_report(tmp_path, log=lines.append)
    assert [p.name for p in written] == ["losses.png"]
    assert "rewards.png not written: no episode has ended yet (no Episode/rew_* scalars)" in lines
    assert any(line.startswith("episode.png not written: no episode has ended yet") for line in lines)
    assert any(line.startswith("terminations.png not written: no episode has ended yet") for line in lines)
    assert not any(line.startswith("losses.png") for line in lines)


@pytest.mark.slow
def test_png_frames_with_one_video_per_env_are_named_after_the_first_video(tracking_run, tmp_path):
    run_dir, _ = tracking_run
    path = tmp_path / "per.mp4"
    out = trainrt(
        "play", str(run_dir), "--video", "--output", str(path), "--seconds", "0.2", "--width", "48",
        "--height", "32", "--renderer", "software", "--video-envs", "2", "--one-file-per-env", "--frames", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout[out.stdout.index("{") :])
    assert [Path(p).name for p in result["paths"]] == ["per_env0.mp4", "per_env1.mp4"]
    assert [Path(p).name for p in result["png_frames"]] == ["per_env0_frame0.png"]
