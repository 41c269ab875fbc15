"""The compiler's checks: one module per concern of SPEC §2 that the schema cannot express.

Each check reads the normalized document and returns its errors; it imports only
``dpone.manifest.context`` and the modules below it. ``dpone.manifest.passes`` orders them.
"""
