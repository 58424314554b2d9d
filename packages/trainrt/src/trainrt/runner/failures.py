"""The failure a user can fix: the runner and its builders raise it with the fix in the message."""

from __future__ import annotations


class ExpectedRunFailure(RuntimeError):
    """A run that fails for a reason the user can fix (the message says how); not a bug, so no traceback."""
