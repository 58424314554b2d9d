"""Damaged checkpoints are named with their problem; loading a run directory falls back, run ids are matched."""

import io
import json
import zipfile

import pytest
import torch

from trainrt.runner.checkpoint import (
    CheckpointError,
    checkpoint_path,
    load_checkpoint,
    load_run_checkpoint,
    read_checkpoint_file,
    save_checkpoint,
)


def _valid_bytes(tmp_path) -> bytes:
    path = save_checkpoint(tmp_path / "source", 1, {"agent": {"w": torch.ones(256)}})
    return path.read_bytes()


def _zip_of_text() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", "not a pickle")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda good: b"", r"is empty \(0 bytes\)"),
        (lambda good: good[: len(good) // 2], r"is truncated \(\d+ bytes, the archive's end is missing\)"),
        (
            lambda good: b"garbage garbage garbage",
            r"is not a checkpoint \(23 bytes that are not a torch.save",
        ),
        (lambda good: _zip_of_text(), r"cannot be read \(.*\); it is damaged or was not written by trainrt"),
    ],
    ids=["empty", "truncated", "garbage", "foreign-zip"],
)
def test_a_damaged_checkpoint_names_the_file_and_the_problem(tmp_path, damage, message):
    good = _valid_bytes(tmp_path)
    path = checkpoint_path(tmp_path / "run", 3)
    path.parent.mkdir(parents=True)
    path.write_bytes(damage(good))
    with pytest.raises(CheckpointError, match=message) as caught:
        read_checkpoint_file(path)
    assert str(path) in str(caught.value)
    # A run directory whose only checkpoint is damaged: no usable checkpoint, every problem listed.
    with pytest.raises(CheckpointError, match=r"no usable checkpoint") as caught:
        load_checkpoint(tmp_path / "run", log=lambda line: None)
    assert str(path) in str(caught.value)


def test_a_run_directory_falls_back_to_the_newest_checkpoint_that_loads(tmp_path):
    run_dir = tmp_path / "run"
    for iteration in (1, 2):
        save_checkpoint(run_dir, iteration, {"agent": {"w": torch.full((2,), float(iteration))}})
    checkpoint_path(run_dir, 3).write_bytes(b"")
    good = checkpoint_path(run_dir, 2).read_bytes()
    checkpoint_path(run_dir, 4).write_bytes(good[:100])
    lines = []
    data = load_checkpoint(run_dir, log=lines.append)
    assert data["iteration"] == 2
    assert data["path"] == str(checkpoint_path(run_dir, 2))
    assert [line.split(" is ")[0] for line in lines[:2]] == [
        f"warning: checkpoint {checkpoint_path(run_dir, 4)}",
        f"warning: checkpoint {checkpoint_path(run_dir, 3)}",
    ]
    assert "falling back to" in lines[-1] and "ckpt_000002.pt" in lines[-1]


def test_only_checkpoints_of_the_directory_s_run_are_taken(tmp_path):
    run_dir = tmp_path / "run"
    save_checkpoint(run_dir, 1, {"run_id": "mine", "agent": {}})
    save_checkpoint(run_dir, 5, {"run_id": "someone_else", "agent": {}})
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": "mine"}))
    lines = []
    assert load_checkpoint(run_dir, log=lines.append)["iteration"] == 1
    assert any("belongs to run someone_else, not to run mine" in line for line in lines), lines
    # an explicit run id wins over the manifest; an explicit file is taken as it is
    assert load_checkpoint(run_dir, run_id="someone_else", log=lines.append)["iteration"] == 5
    assert load_checkpoint(checkpoint_path(run_dir, 5))["run_id"] == "someone_else"


def test_a_checkpoint_named_on_the_command_line_must_belong_to_the_run(tmp_path):
    run_dir, other = tmp_path / "run", tmp_path / "other"
    save_checkpoint(run_dir, 1, {"run_id": "mine", "agent": {}})
    (run_dir / "manifest.json").write_text(json.dumps({"run_id": "mine"}))
    foreign = save_checkpoint(other, 9, {"run_id": "theirs", "agent": {}})
    (other / "manifest.json").write_text(json.dumps({"run_id": "theirs"}))
    assert load_run_checkpoint(run_dir, "1")["iteration"] == 1  # an iteration number of the run
    assert load_run_checkpoint(run_dir, checkpoint_path(run_dir, 1))["iteration"] == 1
    with pytest.raises(CheckpointError) as caught:
        load_run_checkpoint(run_dir, foreign)
    assert str(caught.value) == (
        f"checkpoint {foreign} belongs to run theirs, not to run mine of {run_dir}: "
        f"give its own run directory, {other}, instead"
    )
    with pytest.raises(FileNotFoundError, match="no checkpoint for iteration 9"):
        load_run_checkpoint(run_dir, "9")
