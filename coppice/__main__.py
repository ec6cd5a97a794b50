"""``python -m coppice`` is the ``coppice`` command."""

from coppice.cli import main

raise SystemExit(main())
