"""``python -m coppice.cli`` is the ``coppice`` command."""

from coppice.cli import main

raise SystemExit(main())
