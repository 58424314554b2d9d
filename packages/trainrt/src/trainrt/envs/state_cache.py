"""StateCache: quantities derived from the env state, computed once per version of that state.

Several terms of one step read the same derived quantity (a rotated velocity, a command's reference at the
current frame, anchor-relative body targets). Inside a CUDA graph every small kernel costs a few
microseconds, so computing such a quantity once per state instead of once per reading term saves kernel
nodes without changing any value.

Freshness comes from a version of the state, not from calls placed by hand. Every path that writes the
state bumps it (`StateCache.bump`): the env's own write methods (the physics step, the reset transaction, the
curriculum, the end of a step's resets and updates, loading a saved state) and the command and event
managers after each term's math (a command, a reference frame, a kick to the velocities). A value is
memoized under the version it was computed at, and a bump moves to a new version, so a value is never read
after a write that could change it. Term code never touches the cache's freshness.

Why a Python int, compared when it moves: the write points are Python calls (the env's methods, the
managers' loops), so counting there costs no device work and no host sync, where a device counter would
need one to decide on the host whether a value is fresh. The memo of the old version is dropped at the bump
itself rather than checked at each read, because reads also happen inside the parts of the step that
``torch.compile`` traces (``dynamic=False``): a read that compared ints would make dynamo specialize on the
version and recompile every step. For the same reason a bump inside a traced part drops the memo but leaves
the count alone; the env's eager write methods around those parts advance it. ``version`` therefore counts
the eager bumps; it only ever grows.

The env memoizes only while it runs ``step()`` or ``reset()``. Outside those calls (a test that edits the
state and evaluates a term) every read recomputes, so a raw write there needs no bump.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import torch


class StateCache:
    """Memo of derived quantities, valid for one version of the env state."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._active = False
        self.version = 0
        """How many times the state changed (eager bumps; see the module docstring)."""

    @property
    def active(self) -> bool:
        """Whether values are memoized now (only inside the env's ``step()`` / ``reset()``)."""
        return self._active

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value memoized under ``key`` for the current version, computing it on the first read.

        Keys start with the identity of the object that owns the quantity (``(id(self), "name")``), so two
        terms or views never share an entry.
        """
        if not self._active:
            return compute()
        try:
            return self._values[key]
        except KeyError:
            value = self._values[key] = compute()
            return value

    def bump(self) -> None:
        """The state changed: a new version; every value memoized for the old one is dropped."""
        self._values.clear()
        if torch.compiler.is_compiling():
            return  # a traced int would be a guard: the eager write methods count (module docstring)
        self.version += 1

    def forget(self) -> None:
        """Drop every memoized value without a new version (the state did not change). Dynamo guards on the
        memo's contents (which keys it holds), so a compiled part entered sometimes with an empty memo and
        sometimes with a full one compiles twice: the observation manager calls this before its compiled
        frames, which a step enters with the terms' values memoized and again, after the resets, with none.
        Inside the compiled graph a value read again is computed in the same fused kernels."""
        self._values.clear()

    @contextlib.contextmanager
    def memoizing(self) -> Iterator[None]:
        """Memoize within the block (one env step or reset); forget everything when it ends."""
        self._values.clear()
        self._active = True
        try:
            yield
        finally:
            self._active = False
            self._values.clear()
