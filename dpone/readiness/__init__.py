"""Seed 004's readiness plane: the schema contract as a Python object (``schema_contracts``)."""
