"""The manifest compiler: YAML in, a typed :class:`~dpone.manifest.plan.Plan` (or every error
at once) out. ``compiler.py`` runs it; ``passes.py`` lists its passes and checks in order."""
