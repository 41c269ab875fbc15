"""A local S3-compatible server for the object store tests: moto's server mode on 127.0.0.1.

One server per test process (a session fixture on a free port). Authentication is on, as on
real S3: the server first creates an IAM user with an S3 policy and an access key, then
checks every request's signature, so a wrong secret or an unknown key is refused (403).
Each test gets a bucket of its own; objects are written and read back with boto3, never
through dpone.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.processes import free_port

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """Where the server listens and the credentials it accepts."""

    endpoint: str
    key: str
    secret: str

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
        )

    def env(self) -> dict[str, str]:
        """The standard AWS variables that point a process at this server."""
        return {
            "AWS_ACCESS_KEY_ID": self.key,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": REGION,
        }

    def new_bucket(self) -> str:
        name = f"dpone-{uuid.uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, data: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes:
        body: bytes = self.client().get_object(Bucket=bucket, Key=key)["Body"].read()
        return body


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    import boto3
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.server import ThreadedMotoServer

    # No SDK may ever fall back to the EC2 instance metadata address (not this machine).
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    try:
        # The next three requests go unauthenticated (the IAM setup), every later one is
        # checked (the server runs in this process, so its settings are ours to set).
        settings.INITIAL_NO_AUTH_ACTION_COUNT = 3
        ActionAuthenticatorMixin.request_count = 0
        iam = boto3.client(
            "iam",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="dpone-test")
        iam.put_user_policy(
            UserName="dpone-test",
            PolicyName="s3-all",
            PolicyDocument=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}],
                }
            ),
        )
        key = iam.create_access_key(UserName="dpone-test")["AccessKey"]
        yield S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        server.stop()


__all__ = ["REGION", "S3Server", "s3_server"]
