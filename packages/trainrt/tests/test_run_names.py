"""Default run names: unique within a second, ``runs/latest`` pointing at the newest, and a folder of runs
named for what it is."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from test_runner_train import tiny_config

from trainrt.config import apply_overrides
from trainrt.runner.manifest import load_resolved_config, runs_inside
from trainrt.runner.off_policy_runner import OffPolicyRunner, default_run_dir
from trainrt.runner.run_dir import point_latest_at

pytestmark = pytest.mark.usefixtures("one_thread")


def test_two_default_names_of_one_second_differ():
    cfg = tiny_config("unused")
    names = {default_run_dir(cfg).name for _ in range(64)}
    assert len(names) == 64
    assert all(re.fullmatch(r"sac_g1_walk_flat_mujoco_\d{8}-\d{6}_[0-9a-f]{4}", name) for name in names)


def test_latest_is_a_relative_link_to_the_newest_and_replaces_only_a_link(tmp_path):
    first, second = tmp_path / "run_a", tmp_path / "run_b"
    first.mkdir()
    second.mkdir()
    point_latest_at(first, log=lambda line: None)
    point_latest_at(second, log=lambda line: None)
    link = tmp_path / "latest"
    assert link.is_symlink() and os.readlink(link) == "run_b" and link.resolve() == second.resolve()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "run_a", "run_b"]  # no staging left


def test_a_folder_named_latest_is_kept_and_said(tmp_path):
    (tmp_path / "latest").mkdir()
    (tmp_path / "latest" / "notes.txt").write_text("mine")
    (tmp_path / "run").mkdir()
    lines = []
    point_latest_at(tmp_path / "run", log=lines.append)
    assert (tmp_path / "latest" / "notes.txt").read_text() == "mine"
    assert lines == [
        f"note: {tmp_path / 'latest'} is not a link trainrt made; it stays, and does not point at this run"
    ]


def test_a_default_named_run_becomes_runs_latest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = apply_overrides(tiny_config("unused"), ["training.run_dir=null"])
    assert cfg.training.run_dir is None
    OffPolicyRunner(cfg, log=lambda line: None).run()
    runs = [p for p in Path("runs").iterdir() if not p.is_symlink()]
    assert len(runs) == 1
    assert Path("runs/latest").resolve() == runs[0].resolve()
    assert load_resolved_config("runs/latest").task.name == "g1_walk_flat"


def test_a_folder_of_runs_is_named_with_the_runs_inside(tmp_path):
    for name in ("b_run", "a_run"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    (tmp_path / "not_a_run").mkdir()
    os.symlink("a_run", tmp_path / "latest")
    assert sorted(runs_inside(tmp_path)) == ["a_run", "b_run"]
    with pytest.raises(
        FileNotFoundError, match=r"is a folder of runs, not a run: name one of .*_run, .*_run$"
    ):
        load_resolved_config(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"is .* a trainrt run directory"):
        load_resolved_config(tmp_path / "not_a_run")
