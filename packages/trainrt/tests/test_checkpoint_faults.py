"""Damaged checkpoints are named with their problem; loading a run directory falls back, run ids are matched.

A checkpoint never runs code: one whose pickle names other Python objects is refused unloaded, and the
converter of an earlier version's numpy values cannot run code either. Stray temporary files of killed writes
are removed.
"""

import errno
import io
import json
import os
import re
import tempfile
import time
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

from trainrt.runner import checkpoint as checkpoint_module
from trainrt.runner.checkpoint import (
    POLICY_CHECKPOINT_KEYS,
    CheckpointError,
    checkpoint_path,
    checkpoints_newest_first,
    load_checkpoint,
    load_run_checkpoint,
    read_checkpoint_file,
    remove_stale_temp_files,
    save_checkpoint,
)
from trainrt.runner.checkpoint_convert import convert_checkpoint_file


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
    with pytest.raises(FileNotFoundError) as missing:
        load_run_checkpoint(run_dir, "9")
    assert str(missing.value) == (
        f"no checkpoint for iteration 9 in {run_dir}: {checkpoint_path(run_dir, 9)} does not exist; "
        "the run has checkpoints for iterations 1"
    )
    for iteration in range(2, 14):
        save_checkpoint(run_dir, iteration, {"run_id": "mine", "agent": {}})
    with pytest.raises(
        FileNotFoundError, match=r"iterations 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 \(the newest 10 of 13\)$"
    ):
        load_run_checkpoint(run_dir, "99")
    with pytest.raises(FileNotFoundError, match=r"the run has no checkpoints$"):
        load_run_checkpoint(tmp_path / "empty", "3")


# --- a checkpoint file never runs code ----------------------------------------------------------------------


class _RunsCode:
    """Unpickles by calling ``os.system``: what a planted checkpoint carries."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def plant_code(path, marker, **extra) -> None:
    """A checkpoint at ``path`` whose unpickling would create ``marker`` (a torch.save archive like ours)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"format_version": 1, "iteration": 9, "agent": {}, "x": _RunsCode(marker), **extra}, path)


def _assert_one_line_refusal(message: str, path) -> None:
    assert "\n" not in message, message
    assert f"checkpoint {path} holds Python objects that could run code when loaded" in message
    assert "trainrt refuses it" in message and f"trainrt checkpoint convert {path}" in message


def test_a_checkpoint_that_would_run_code_is_refused_without_running_it(tmp_path):
    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    for iteration in (1, 2):
        save_checkpoint(run_dir, iteration, {"agent": {"w": torch.full((2,), float(iteration))}})
    planted = checkpoint_path(run_dir, 3)
    plant_code(planted, marker)
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint_file(planted)
    _assert_one_line_refusal(str(caught.value), planted)
    assert "posix.system" in str(caught.value)
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(planted)
    _assert_one_line_refusal(str(caught.value), planted)
    with pytest.raises(CheckpointError) as caught:
        load_run_checkpoint(run_dir, "3")
    _assert_one_line_refusal(str(caught.value), planted)
    # a run directory falls back to the newest checkpoint that loads, naming the refused one
    lines = []
    assert load_run_checkpoint(run_dir, log=lines.append)["iteration"] == 2
    assert "holds Python objects that could run code" in lines[0] and str(planted) in lines[0]
    assert not marker.exists()
    # the plant is live: loading it the way trainrt used to runs its code
    torch.load(planted, weights_only=False)
    assert marker.exists()


def test_a_run_directory_whose_checkpoints_all_would_run_code_has_none_usable(tmp_path):
    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    for iteration in (1, 2):
        plant_code(checkpoint_path(run_dir, iteration), marker)
    with pytest.raises(CheckpointError, match="no usable checkpoint") as caught:
        load_checkpoint(run_dir, log=lambda line: None)
    assert str(checkpoint_path(run_dir, 1)) in str(caught.value) and str(checkpoint_path(run_dir, 2)) in str(
        caught.value
    )
    assert not marker.exists()


_NO_EXTRAS = ["training.final_eval=false", "training.export_onnx=false"]


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_the_checkpoints_a_run_writes_hold_only_tensors_and_plain_values(tmp_path, algo, one_thread):
    from tiny_runs import TINY_RUN

    from trainrt.config import apply_overrides, cpu_demo_preset
    from trainrt.runner import OffPolicyRunner

    networks = ["algo.params.actor_hidden_dim=8", "algo.params.critic_hidden_dim=8"]
    if algo == "flashsac":
        networks += ["algo.params.actor_num_blocks=1", "algo.params.critic_num_blocks=1"]
    cfg = apply_overrides(
        cpu_demo_preset(algo, "g1_walk_flat", "mujoco"),
        [
            *TINY_RUN,
            *networks,
            *_NO_EXTRAS,
            "training.save_replay=true",
            f"training.run_dir={tmp_path / 'run'}",
        ],
    )
    OffPolicyRunner(cfg, log=lambda line: None).run()
    for path in (checkpoint_path(tmp_path / "run", 1), checkpoint_path(tmp_path / "run", 2)):
        assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
        data = read_checkpoint_file(path)  # weights-only
        assert {"agent", "rng", "config", "env_meta", "replay", "run_id"} <= set(data)
        assert "rings" in data["replay"]


# --- entries under checkpoints/ that are no checkpoint file -------------------------------------------------


def _make_unreadable(path, monkeypatch) -> None:
    """``path`` cannot be opened: chmod 000, and (since that does not stop root) ``open`` refusing it."""
    path.chmod(0)
    if os.geteuid() == 0:
        real_open = open

        def refusing_open(file, *args, **kwargs):
            if os.fspath(file) == os.fspath(path):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(checkpoint_module, "open", refusing_open, raising=False)


def test_entries_that_are_no_checkpoint_file_are_named_and_skipped(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    save_checkpoint(run_dir, 1, {"agent": {"w": torch.ones(2)}})
    folder = checkpoint_path(run_dir, 1).parent
    (folder / "ckpt_000006.pt").mkdir()  # a directory under a checkpoint's name
    (folder / "ckpt_000005.pt").symlink_to(folder / "gone.pt")  # dangling
    (folder / "ckpt_000004.pt").symlink_to(folder / "ckpt_000004.pt")  # a loop
    unreadable = save_checkpoint(run_dir, 3, {"agent": {"w": torch.ones(2)}})
    _make_unreadable(unreadable, monkeypatch)
    expected = {
        6: "is a directory, not a checkpoint file",
        5: f"is a symlink to {folder / 'gone.pt'}, which does not exist",
        4: "is a symlink loop",
        3: "cannot be read (Permission denied); make it readable (chmod u+r) or remove it",
    }
    lines = []
    data = load_checkpoint(run_dir, log=lines.append)
    assert data["iteration"] == 1
    for line, (iteration, problem) in zip(lines, expected.items()):
        assert line.startswith(f"warning: checkpoint {checkpoint_path(run_dir, iteration)} {problem}"), line
    assert "falling back to" in lines[-1] and "ckpt_000001.pt" in lines[-1]
    # named by iteration, the entry's own problem is said, not "does not exist"
    for iteration, problem in expected.items():
        with pytest.raises(CheckpointError, match=re.escape(problem)):
            load_run_checkpoint(run_dir, str(iteration))
    # with nothing usable left, the error lists each problem
    checkpoint_path(run_dir, 1).unlink()
    with pytest.raises(CheckpointError, match="no usable checkpoint") as caught:
        load_checkpoint(run_dir, log=lambda line: None)
    for problem in expected.values():
        assert problem in str(caught.value)


# --- what play, eval and export read ------------------------------------------------------------------------


def test_play_eval_and_export_take_only_checkpoints_with_what_they_read(tmp_path):
    run_dir = tmp_path / "run"
    meta = {"obs_dims": {"policy": 3}, "num_actions": 2}
    save_checkpoint(run_dir, 1, {"agent": {}, "env_meta": meta})
    save_checkpoint(run_dir, 2, {"env_meta": meta})  # no agent
    save_checkpoint(run_dir, 3, {"agent": {}, "env_meta": {"num_actions": 2}})  # no obs_dims
    lines = []
    assert load_run_checkpoint(run_dir, log=lines.append, require=POLICY_CHECKPOINT_KEYS)["iteration"] == 1
    assert f"checkpoint {checkpoint_path(run_dir, 3)} has no 'env_meta.obs_dims'" in lines[0]
    assert f"checkpoint {checkpoint_path(run_dir, 2)} has no 'agent' (it holds env_meta, " in lines[1]
    with pytest.raises(CheckpointError, match=r"has no 'agent' .*give another one with --checkpoint"):
        load_run_checkpoint(run_dir, "2", require=POLICY_CHECKPOINT_KEYS)
    assert load_run_checkpoint(run_dir, "2")["iteration"] == 2  # nothing required, nothing missing


# --- stray temporary files of killed writes -----------------------------------------------------------------


def test_stale_temp_files_of_killed_writes_are_removed_and_nothing_else(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    _, made = tempfile.mkstemp(prefix=".run_summary.json.", suffix=".tmp", dir=tmp_path)  # as atomic_write
    stale = [folder / ".ckpt_000002.pt.abc123.tmp", Path(made)]
    kept = [
        folder / "notes.tmp",
        folder / ".hidden",
        folder / "ckpt_000002.pt",
        folder / ".ckpt_000002.pt.abc123.tmp.keep",
        folder / ".notes.txt.abc12345.tmp",  # not a file trainrt writes
        folder / ".ckpt_000002.pt.my backup.tmp",
        tmp_path / ".config.json.young123.tmp",  # a write that may be in progress
    ]
    for path in stale + kept:
        path.write_bytes(b"x")
    (folder / ".ckpt_000003.pt.abcdefgh.tmp").mkdir()  # a directory is never removed
    an_hour_ago = time.time() - 3600
    for path in [*stale, *kept[:-1]]:
        os.utime(path, (an_hour_ago, an_hour_ago))
    lines = []
    removed = remove_stale_temp_files(folder, log=lines.append) + remove_stale_temp_files(tmp_path)
    assert sorted(removed) == sorted(stale)
    assert not any(path.exists() for path in stale)
    assert all(path.exists() for path in kept) and (folder / ".ckpt_000003.pt.abcdefgh.tmp").is_dir()
    assert lines == [f"removed {stale[0]}, the temporary file of a write that was killed before it finished"]
    assert remove_stale_temp_files(tmp_path, min_age_sec=0.0) == [kept[-1]]
    assert remove_stale_temp_files(tmp_path / "nowhere") == []


# --- converting a trusted checkpoint of an earlier version --------------------------------------------------


def _numpy_checkpoint(path) -> dict:
    """A checkpoint as an earlier version might have written it: numpy arrays and scalars among the values."""
    payload = {
        "format_version": 1,
        "iteration": 4,
        "agent": {"actor": OrderedDict(w=np.arange(6, dtype=np.float32).reshape(2, 3)), "steps": np.int64(7)},
        "rng": {"numpy": np.random.RandomState(0).get_state()},
        "timings": [{"iteration_time_sec": np.float64(0.25)}],
        "env_meta": {"obs_dims": {"policy": np.int64(3)}, "joint_names": np.array(["a", "b"])},
        "swapped": np.arange(3, dtype=">f8"),
        "flag": np.bool_(True),
        "already": torch.ones(2),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return payload


def test_a_checkpoint_with_numpy_values_is_refused_and_converts_into_one_that_loads(tmp_path):
    path = checkpoint_path(tmp_path / "run", 4)
    _numpy_checkpoint(path)
    before = path.read_bytes()
    with pytest.raises(CheckpointError) as caught:
        read_checkpoint_file(path)
    _assert_one_line_refusal(str(caught.value), path)
    assert "numpy" in str(caught.value)
    result = convert_checkpoint_file(path)
    original = path.with_name("ckpt_000004.pt.unsafe")
    assert result == {"checkpoint": str(path), "original": str(original), "converted": 8}
    assert original.read_bytes() == before  # the original is kept
    data = read_checkpoint_file(path)
    assert torch.equal(data["agent"]["actor"]["w"], torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert isinstance(data["agent"]["actor"], OrderedDict)
    assert data["agent"]["steps"] == 7 and type(data["agent"]["steps"]) is int
    assert (
        data["timings"][0]["iteration_time_sec"] == 0.25
        and type(data["timings"][0]["iteration_time_sec"]) is float
    )
    assert data["env_meta"] == {"obs_dims": {"policy": 3}, "joint_names": ["a", "b"]}
    kind, keys, *_ = data["rng"]["numpy"]
    assert kind == "MT19937" and torch.equal(keys, torch.from_numpy(np.random.RandomState(0).get_state()[1]))
    assert torch.equal(data["swapped"], torch.arange(3, dtype=torch.float64))
    assert data["flag"] is True and torch.equal(data["already"], torch.ones(2))
    assert checkpoints_newest_first(tmp_path / "run") == [path]  # the kept original is no checkpoint
    # converting again: nothing to do
    assert convert_checkpoint_file(path) == {"checkpoint": str(path), "original": None, "converted": 0}


def test_converting_writes_beside_and_never_replaces_a_file(tmp_path):
    path = checkpoint_path(tmp_path / "run", 4)
    _numpy_checkpoint(path)
    before = path.read_bytes()
    out = tmp_path / "converted.pt"
    assert convert_checkpoint_file(path, output=out)["checkpoint"] == str(out)
    assert path.read_bytes() == before and read_checkpoint_file(out)["iteration"] == 4
    with pytest.raises(
        CheckpointError, match=rf"{re.escape(str(out))} exists; converting .* will not replace it"
    ):
        convert_checkpoint_file(path, output=out)
    path.with_name("ckpt_000004.pt.unsafe").write_bytes(b"someone's file")
    with pytest.raises(CheckpointError, match=r"ckpt_000004.pt.unsafe exists"):
        convert_checkpoint_file(path)
    assert path.read_bytes() == before


def test_the_converter_refuses_code_and_values_without_a_plain_form(tmp_path):
    marker = tmp_path / "marker"
    planted = tmp_path / "planted.pt"
    plant_code(planted, marker, weights=np.ones(3))
    before = planted.read_bytes()
    with pytest.raises(CheckpointError) as caught:
        convert_checkpoint_file(planted)
    message = str(caught.value)
    assert "\n" not in message and f"checkpoint {planted} holds Python objects beyond numpy values" in message
    assert "posix.system" in message and "trainrt neither loads nor converts it" in message
    assert not marker.exists() and planted.read_bytes() == before
    assert not planted.with_name("planted.pt.unsafe").exists()
    objects = tmp_path / "objects.pt"
    torch.save(
        {"format_version": 1, "iteration": 1, "agent": {"names": np.array([1, "x"], dtype=object)}}, objects
    )
    with pytest.raises(
        CheckpointError, match=r"cannot be converted: agent.names holds a numpy value of dtype object"
    ):
        convert_checkpoint_file(objects)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": np.ones(2)}, foreign)
    with pytest.raises(CheckpointError, match="is not a trainrt checkpoint of format 1"):
        convert_checkpoint_file(foreign)
    with pytest.raises(CheckpointError, match="is a directory"):
        convert_checkpoint_file(tmp_path)


class _OneLayerAgent:
    """The surface ``load_agent_weights`` uses, around one linear layer of ``width`` outputs."""

    device = torch.device("cpu")

    def __init__(self, width: int):
        self.actor = torch.nn.Linear(3, width)

    def state_dict(self) -> dict:
        return {"actor": self.actor.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.actor.load_state_dict(state["actor"])


def _config(**params):
    """What ``load_fitting_weights`` reads of a config: ``algo.params.model_dump``."""
    from types import SimpleNamespace

    return SimpleNamespace(algo=SimpleNamespace(params=SimpleNamespace(model_dump=lambda mode: params)))


def test_weights_that_do_not_fit_are_one_line_naming_the_file_the_tensor_and_the_settings():
    saved = {"path": "run/checkpoints/ckpt_000002.pt", "agent": _OneLayerAgent(8).state_dict()}
    saved |= {
        "config": {"algo": {"params": {"hidden": 8, "gamma": 0.99}}},
        "env_meta": {"obs_dims": {"p": 3}},
    }
    with pytest.raises(CheckpointError) as caught:
        checkpoint_module.load_fitting_weights(saved, _OneLayerAgent(16), _config(hidden=16, gamma=0.99))
    assert str(caught.value) == (
        "cannot resume from run/checkpoints/ckpt_000002.pt: its weights do not fit the networks this config "
        "builds (RuntimeError: size mismatch: Linear weight is [8, 3] in the checkpoint, [16, 3] in the networks "
        "now (and 1 more tensor)); algo.params that differ from the run's: hidden=16 (the run used 8); drop "
        "those overrides to resume"
    )
    with pytest.raises(CheckpointError) as caught:
        checkpoint_module.load_run_weights(
            {**saved, "run_dir": "run"}, _OneLayerAgent(16), _config(hidden=8), {"p": 4}, action="cannot play"
        )
    assert str(caught.value).startswith("cannot play run/checkpoints/ckpt_000002.pt: its weights do not fit ")
    assert str(caught.value).endswith(
        "algo.params that differ from the run's: none; observation widths {'p': 4} differ from the run's "
        "{'p': 3} (task.observations or another task setting changes them); set those values in "
        "run/config.json back to the run's, or give a checkpoint trained with them"
    )
    agent = _OneLayerAgent(8)
    checkpoint_module.load_fitting_weights(saved, agent, _config(hidden=8))
    assert torch.equal(agent.actor.weight, saved["agent"]["actor"]["weight"])
