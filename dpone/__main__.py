"""``python -m dpone`` is the ``dpone`` command."""

from dpone.cli.main import main

main()
