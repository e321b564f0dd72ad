"""Issue 42 §2: object storage the command cannot use is one line naming the store and what to set, exit 2, in a
bounded time (botocore's own retries), nothing written: no credentials at all, and an endpoint nothing listens on.
Real processes: the AWS environment is read once per process (fsspec caches its file systems)."""

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("s3fs")
RENDER = ["render", "--scene", "causal3dident", "--n", "8", "--resolution", "16", "--samples", "1", "--no-progress",
          "--out", "s3://bucket/x.zarr"]


def ident3d(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """The command in a fresh process with only ``env``'s AWS settings (none from this machine's files)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    base.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                 "AWS_EC2_METADATA_DISABLED": "true", **env})
    return subprocess.run([sys.executable, "-m", "ident3d.pipelines.cli", *args], capture_output=True, text=True,
                          env=base, timeout=240)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_credentials_is_one_line_saying_what_to_set(tmp_path):
    r = ident3d({}, *RENDER)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("ident3d render: error: no credentials to reach s3://bucket/x.zarr (NoCredentialsError")
    assert "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)" in r.stderr


def test_an_unreachable_endpoint_is_one_line_naming_it():
    port = closed_port()
    r = ident3d({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "a",
                 "AWS_SECRET_ACCESS_KEY": "b"}, *RENDER)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("ident3d render: error: cannot reach s3://bucket/x.zarr (EndpointConnectionError")
    assert "check the URL and the endpoint (for s3://: AWS_ENDPOINT_URL)" in r.stderr
