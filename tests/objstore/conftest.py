"""The ``s3p`` fixture: a pipeline over a fresh bucket of the local S3 server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.s3pipeline import S3Pipeline
from tests.support.s3server import S3Server


@pytest.fixture
def s3p(s3_server: S3Server, tmp_path: Path) -> S3Pipeline:
    """A pipeline over a fresh bucket, with the standard AWS variables set."""
    pipeline = S3Pipeline(tmp_path, s3_server, s3_server.new_bucket())
    pipeline.env = pipeline.standard_env()
    return pipeline
