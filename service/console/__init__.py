"""The web console: a browser client of the public API, served from files in this package.

:func:`install_console` adds the routes that serve it (``/`` and ``/console/...``) and the API's
own ``/docs`` and ``/redoc`` pages, whose viewers are vendored here too so that no page of the
service loads anything from another origin. None of these routes touches the database: the
console's JavaScript reads and writes everything through ``/v1``.
"""

from service.console.router import OPEN_PATHS, install_console

__all__ = ["OPEN_PATHS", "install_console"]
