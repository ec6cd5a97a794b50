"""Alembic migrations of the Coppice database; run them with ``coppice migrate``.

This is a package so that setuptools ships it next to ``service``, and
``service.db.migrate`` finds it in a checkout and in an installed wheel alike.
"""
