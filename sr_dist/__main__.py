"""``python -m sr_dist``: the same as the ``sr-dist`` console script."""

from sr_dist.cli import main

if __name__ == "__main__":
    main()
