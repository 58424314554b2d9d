"""``python -m trainrt ...``: the same command line as the ``trainrt`` script."""

from trainrt.cli import main

if __name__ == "__main__":
    main()
