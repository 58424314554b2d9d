"""An env whose backend compiles its kernels in the background (``compile_in_background``) against one built
at once: a saved state loaded before the kernels are in must give the same steps, bit for bit."""

from __future__ import annotations

import pytest
import torch
from state_snapshot import StateSnapshot, compare

from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV
from trainrt.envs import ManagerBasedRlEnv
from trainrt.tasks import make_task_cfg


def _env(compile_in_background: bool) -> ManagerBasedRlEnv:
    try:
        return ManagerBasedRlEnv(
            make_task_cfg("g1_walk_flat"),
            sim="mjwarp",
            num_envs=3,
            device="cpu",
            seed=5,
            compile_in_background=compile_in_background,
        )
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


@pytest.mark.slow
def test_a_state_loaded_while_the_kernels_compile_steps_as_in_an_env_built_at_once(monkeypatch):
    """A resume loads its saved state right after the env is built, while the backend may still be compiling:
    the backend's deferred first forward and derived constants (the walk randomizes masses) run before the
    state goes in, so the saved constants stay as saved and the steps from there match an env built at once."""
    monkeypatch.setenv(COMPILE_WORKERS_ENV, "2")
    source = _env(False)
    source.reset()
    gen = torch.Generator().manual_seed(3)
    actions = [torch.rand(3, source.num_actions, generator=gen) * 2 - 1 for _ in range(6)]
    for action in actions[:3]:
        source.step(action)
    saved = source.state_dict()
    assert any(name.startswith("sim.model.") for name in saved)  # the derived constants are saved state
    late, now = _env(True), _env(False)
    assert late.backend.compile_pending
    for env in (late, now):
        env.load_state_dict(saved)
        env.rng.set_state(source.rng.get_state())
    assert not late.backend.compile_pending
    compare(StateSnapshot(late), StateSnapshot(now), rtol=0.0, atol=0.0)
    for env in (late, now):
        for action in actions[3:]:
            env.step(action)
    compare(StateSnapshot(late), StateSnapshot(now), rtol=0.0, atol=0.0)
