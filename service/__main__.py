"""``python -m service`` is the ``coppice`` command."""

from service.cli import main

raise SystemExit(main())
