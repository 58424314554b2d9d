"""CompiledStepMath: the env's per-step math under torch.compile (which parts, compiling them now, why not).

Mixed into `ManagerBasedRlEnv`, whose construction builds the parts (``CompiledOnFirstCall``): the terms after
physics, the observation frames, and the reset math on either side of the transaction. Compiling them, putting
them back to eager with a reason, compiling them before the first reset (`compile_term_math_now`, adr/0036)
and saying which run eagerly is this class's concern; stepping is the env's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainrt.envs.env_state import named_state_tensors
from trainrt.hotpath import cold_path
from trainrt.mdp.math import build_tables


class CompiledStepMath:
    """The compile switches of the env's per-step math (mixed into `ManagerBasedRlEnv`)."""

    # the env's parts and state these methods read (built by ManagerBasedRlEnv.__init__)
    _step_terms: Any
    _reset_payload_math: Any
    _after_reset_math: Any
    _reset_rows: Callable[..., None]
    _done: torch.Tensor
    observation_manager: Any
    state_cache: Any
    rng: torch.Generator
    device: torch.device

    @cold_path
    def compile_term_math(self) -> bool:
        """Fuse the per-step term math with torch.compile: terminations, rewards, metrics and the episode
        statistics after physics (`_evaluate_step_terms`); the observation terms (`ObservationManager`; its
        noise is drawn eagerly first, from ``rng``, in the same order); and the math on either side of the
        reset transaction (`_build_reset_payload`, `_after_reset`: the commands, the events, the managers'
        row resets), whose draws `_reset_rows` makes first, in a fixed order. Same math, a few kernels
        instead of one per op.

        Each part compiles at its first call (the next step; make it a warm-up step, before any CUDA graph
        capture). A part that fails to compile runs eagerly from then on, and `term_math_reasons` says
        why. Returns whether torch.compile accepted every part."""
        terms = self._step_terms.compile()
        observations = self.observation_manager.compile()
        resets = self._reset_payload_math.compile() & self._after_reset_math.compile()
        return terms and observations and resets

    @cold_path
    def compile_term_math_now(self) -> None:
        """Compile the parts `compile_term_math` switched on now rather than at the next steps: each runs once,
        as a step calls it (physics and the reset transaction left out), on the state the env holds, and
        every tensor of the env's state and its generator are then put back as they were, so the next reset
        or step runs from the same state and draws the same numbers. No simulation work: it can run while the
        backend still compiles its kernels (``compile_in_background``). Parts that are not compiled just run
        eagerly here, with no effect."""
        build_tables(self.device)  # as an eager call would have, before the first trace
        live = list(named_state_tensors(self).values())
        saved = [tensor.clone() for tensor in live]
        generator = self.rng.get_state()
        try:
            with self.state_cache.memoizing():
                self.state_cache.bump()  # as after physics
                self._step_terms()
                self.observation_manager.compute(update_history=False)
                self._reset_rows(torch.zeros_like(self._done), transact=False)
                self.observation_manager.compute(update_history=True)
        finally:
            for tensor, value in zip(live, saved):
                tensor.copy_(value)
            self.rng.set_state(generator)

    @cold_path
    def uncompile_term_math(self, reason: str) -> None:
        """Run the per-step term math eagerly again, recording ``reason``."""
        self._step_terms.uncompile(reason)
        self.observation_manager.uncompile(reason)
        self._reset_payload_math.uncompile(reason)
        self._after_reset_math.uncompile(reason)

    TERM_MATH_PARTS = ("terms", "observations", "reset_payload", "after_reset")
    """The parts of the per-step math that `compile_term_math` compiles."""

    @cold_path
    def term_math_reasons(self) -> dict[str, str]:
        """Why each part of the per-step term math runs eagerly, ``{part: reason}`` over `TERM_MATH_PARTS`
        (empty when all run compiled)."""
        parts = {
            "terms": self._step_terms,
            "observations": self.observation_manager.compiled_frames,
            "reset_payload": self._reset_payload_math,
            "after_reset": self._after_reset_math,
        }
        return {name: part.fallback_reason for name, part in parts.items() if not part.compiled}
