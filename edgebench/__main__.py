"""``python -m edgebench`` == the ``edgebench`` console script."""

from edgebench.cli import run

run()
