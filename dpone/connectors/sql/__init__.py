"""SQL that the database connectors share: identifiers, the SELECT of a relation with cursor
pushdown, and PostgreSQL's connection, errors and types. Public to every connector package;
importing this package loads no database driver (``postgres.py`` and ``pgtypes.py`` do)."""
