"""Logical types, the declared contract, and the vectorized enforcement engine."""
