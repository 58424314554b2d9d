"""Command-line entry for the G1 asset cache: ``python -m simcore.assets fetch``."""

from simcore._src.assets import main

if __name__ == "__main__":
    raise SystemExit(main())
