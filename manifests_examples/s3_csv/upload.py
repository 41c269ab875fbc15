"""Put the orders export of ../orders_csv into the bucket this example reads.

Talks to the S3-compatible server at $DPONE_S3_ENDPOINT (moto locally, see manifest.yaml)
with the standard AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, through pyarrow (which dpone
already depends on): creates the bucket if it is missing, then writes
s3://dpone-examples/orders/<file> for every CSV file of ../orders_csv/data/orders/.

    python manifests_examples/s3_csv/upload.py
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow.fs as pafs

BUCKET = "dpone-examples"
DATA = Path(__file__).resolve().parent.parent / "orders_csv" / "data" / "orders"


def main() -> None:
    endpoint = urlsplit(os.environ["DPONE_S3_ENDPOINT"])
    fs = pafs.S3FileSystem(
        access_key=os.environ["AWS_ACCESS_KEY_ID"],
        secret_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=endpoint.netloc,
        scheme=endpoint.scheme,
        region=os.environ.get("AWS_REGION", "us-east-1"),
        allow_bucket_creation=True,
    )
    fs.create_dir(BUCKET)
    for path in sorted(DATA.glob("*.csv")):
        with fs.open_output_stream(f"{BUCKET}/orders/{path.name}") as out:
            out.write(path.read_bytes())
        print(f"s3://{BUCKET}/orders/{path.name}")


if __name__ == "__main__":
    main()
