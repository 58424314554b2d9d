"""Resolving name patterns (exact names or regular expressions) to indices once, at term construction."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from trainrt.hotpath import cold_path


@cold_path
def match_names(patterns: str | Sequence[str], names: Sequence[str], kind: str) -> list[int]:
    """Indices into ``names`` matched by ``patterns``, in ``names`` order; ValueError for a pattern matching none.

    Args:
        patterns: one pattern or a sequence; each is an exact name or a regex matched with ``re.fullmatch``.
        names: the candidate names (e.g. ``env.robot.joint_names``).
        kind: what the names are ("joint", "body", "geom"), for error messages.
    """
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    if not patterns:
        raise ValueError(f"no {kind} patterns given; {kind}s: {list(names)}")
    for pattern in patterns:
        if not any(name == pattern or re.fullmatch(pattern, name) for name in names):
            raise ValueError(f"{kind} pattern {pattern!r} matches no {kind}; {kind}s: {list(names)}")
    return [i for i, name in enumerate(names) if any(name == p or re.fullmatch(p, name) for p in patterns)]


@cold_path
def values_by_pattern(
    values: float | Mapping[str, float], names: Sequence[str], kind: str, default: float | None = None
) -> list[float]:
    """One value per name: a scalar for all, or the first matching entry of a ``{pattern: value}`` mapping.

    Names no pattern matches take ``default``; without a default they raise ValueError.
    """
    if not isinstance(values, Mapping):
        return [float(values)] * len(names)
    out = []
    for name in names:
        hits = [v for p, v in values.items() if name == p or re.fullmatch(p, name)]
        if hits:
            out.append(float(hits[0]))
        elif default is not None:
            out.append(float(default))
        else:
            raise ValueError(f"{kind} {name!r} matches none of the patterns {sorted(values)}")
    return out
