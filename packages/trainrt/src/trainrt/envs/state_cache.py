"""StateCache: quantities derived from the env state, computed once while that state holds.

Several terms of one step read the same derived quantity (a rotated velocity, a command's reference at the
current frame, anchor-relative body targets). Inside a CUDA graph every small kernel costs a few
microseconds, so computing such a quantity once per state instead of once per reading term saves kernel
nodes without changing any value.

The env owns one cache. It memoizes only while the env runs ``step()`` or ``reset()`` and clears it at every
point where the state or the commands change (after physics, after the reset transaction, after the command
update and interval events). Outside those calls (a test that edits the state and evaluates a term) every
read recomputes, so a memoized value can never be stale.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Hashable, Iterator
from typing import Any


class StateCache:
    """Memo of derived quantities, valid until the env state next changes."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}
        self._active = False

    @property
    def active(self) -> bool:
        """Whether values are memoized now (only inside the env's ``step()`` / ``reset()``)."""
        return self._active

    def get(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The value memoized under ``key`` since the last state change, computing it on the first read.

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

    def invalidate(self) -> None:
        """Forget every value: the state or the commands changed."""
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
