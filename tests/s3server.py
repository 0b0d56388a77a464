"""A real S3-compatible server for tests: moto's server mode on a free loopback port, one bucket per test."""

from __future__ import annotations

import socket
import uuid
from contextlib import contextmanager


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
           "AWS_DEFAULT_REGION": "us-east-1"}


@contextmanager
def s3_server():
    """Yields (environment for boto3 clients and subprocesses, bucket name); the bucket exists."""
    import boto3
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        env = dict(AWS_ENV, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
        bucket = f"orchard-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket=bucket)
        yield env, bucket
    finally:
        server.stop()
