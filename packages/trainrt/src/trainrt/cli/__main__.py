"""``python -m trainrt.cli ...``: the same command line as ``trainrt`` and ``python -m trainrt``."""

from trainrt.cli import main

if __name__ == "__main__":
    main()
