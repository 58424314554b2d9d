"""A tracking run whose motion clip moved: eval, play and export take --motion-file, a resume takes
task.motion_file=, and the refusal without them says so. The clip's content decides what is said aloud: the
same file moved passes quietly; a resume on another clip warns, and so does a clip file replaced at the run's
path."""

import shutil

import pytest
from cli_runs import train, trainrt

from trainrt.robots import G1


@pytest.mark.slow
def test_a_run_whose_clip_moved_is_reached_through_its_new_place(tmp_path):
    clips = [p for p in G1.motion_files() if p.name == "sub3_largebox_003_mj.npz"]
    others = [p for p in G1.motion_files() if p.name == "motion_crawl_slope.npz"]
    if not clips or not others:
        pytest.skip("G1 motion clips are not fetched")
    clip = tmp_path / "clip.npz"
    shutil.copyfile(clips[0], clip)
    run_dir = tmp_path / "run"
    out = train(run_dir, "sac", "g1_motion_tracking", "mujoco", f"task.motion_file={clip}")
    assert out.returncode == 0, out.stderr[-3000:]
    moved = tmp_path / "elsewhere" / "clip.npz"
    moved.parent.mkdir()
    clip.rename(moved)

    refused = trainrt("eval", str(run_dir), "--num-envs", "2", "--steps", "3")
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "Traceback" not in refused.stderr and "Value error" not in refused.stderr
    assert "task.motion_file: motion file" in refused.stderr and "not found" in refused.stderr
    assert (
        "give its new place: --motion-file PATH (eval, play, export) or task.motion_file=PATH"
        in refused.stderr
    )

    evaluated = trainrt("eval", str(run_dir), "--num-envs", "2", "--steps", "3", "--motion-file", str(moved))
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "is not the clip checkpoint" not in evaluated.stderr  # the same clip at another place
    exported = trainrt("export", str(run_dir), "--motion-file", str(moved))
    assert exported.returncode == 0, exported.stderr[-3000:]
    played = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "3", "--motion-file", str(moved))
    assert played.returncode == 0, played.stderr[-3000:]

    resumed = trainrt(
        "train", f"training.resume={run_dir}", "algo.max_iterations=3", f"task.motion_file={moved}"
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "is not the clip checkpoint" not in resumed.stderr  # content decides: the same clip, moved

    # A resume on another clip is said aloud: training goes on with that clip.
    other = tmp_path / "other.npz"
    shutil.copyfile(others[0], other)
    switched = trainrt(
        "train", f"training.resume={run_dir}", "algo.max_iterations=4", f"task.motion_file={other}"
    )
    assert switched.returncode == 0, switched.stderr[-3000:]
    assert (
        f"warning: motion clip {other} (command 'motion') is not the clip checkpoint iteration 3 was trained on "
        f"({moved}, another sha256): training goes on with the clip as it is now"
    ) in switched.stderr

    # Another clip's content at the run's path: the results are said to be for that file, not the trained one.
    shutil.copyfile(clips[0], other)
    replaced = trainrt("eval", str(run_dir), "--num-envs", "2", "--steps", "3")
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert (
        f"warning: motion clip {other} (command 'motion') is not the clip checkpoint iteration 4 was trained on "
        f"({other}, another sha256): the results are for the clip as it is now"
    ) in replaced.stderr
