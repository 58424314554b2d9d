"""simcore."""
