"""``python -m dpone`` is the ``dpone`` command."""

from dpone.entry import main

main()
