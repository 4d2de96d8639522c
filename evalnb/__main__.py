"""``python -m evalnb``: the same command as the ``evalnb`` console script."""

from __future__ import annotations

from evalnb.cli import console

if __name__ == "__main__":
    console()
