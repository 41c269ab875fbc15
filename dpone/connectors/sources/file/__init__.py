"""File sources: a glob of CSV, JSONL or Parquet files, read in sorted order, chunk by chunk.

Memory is bounded by the chunk: CSV and JSONL are read in blocks of whole lines
(``blocks.py``), Parquet one row group's batches at a time (``parquet.py``). Each file's
SHA-256 is computed before the file is read, so a ``record_ref`` can later refuse a file that
changed. A line that does not decode (a CSV row with the wrong field count, an unterminated
quote, invalid text: ``csv.py``; a JSONL line that is not a JSON object: ``jsonl.py``) does
not stop the read: it comes out as a :class:`~dpone.connectors.base.DecodeFailure` of its
chunk and the lifecycle quarantines it or fails the run. Only the block that failed to parse
is looked at line by line; clean blocks go through Arrow whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.connectors.sources.file.source import FileSource

# Lazy, as every package __init__: importing a submodule (the REST source takes JSON values'
# text from jsonl.py) pulls in no Arrow CSV reader.
__getattr__, __dir__ = exports(__name__, {"FileSource": "dpone.connectors.sources.file.source"})

__all__ = ["FileSource"]
