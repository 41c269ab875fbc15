"""dpone: declarative data loads with runtime data contracts, a durable DLQ and evidence."""

from dpone.errors import DponeError, ErrorDetail, ManifestError

__version__ = "0.1.0"

__all__ = ["DponeError", "ErrorDetail", "ManifestError", "__version__"]
