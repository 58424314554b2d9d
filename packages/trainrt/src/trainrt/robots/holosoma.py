"""The pinned holosoma wheel, the asset source of the robots it ships (its Python code is never imported)."""

import simcore

HOLOSOMA_WHEEL = simcore.PinnedWheel(
    requirement="holosoma==0.0.3",
    filename="holosoma-0.0.3-py3-none-any.whl",
    sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
)
"""holosoma 0.0.3 from PyPI: MJCF models and retargeted motion clips."""
