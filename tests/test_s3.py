"""Stores on S3-compatible object storage, for real: a local S3 server (moto's, a subprocess on 127.0.0.1 with IAM
authentication on, so bad credentials are refused as AWS would), reached through the standard ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` environment variables. Every command on ``s3://`` URLs: render
(on a Dask LocalCluster, whose worker processes inherit the environment), resume after a killed render process,
check and --repair, show, train, evaluate, export and ``ident3d.open_store``; a store rendered to S3 is bit-identical
to the same render on disk; a missing bucket, bad credentials or a prefix holding other data are one line and exit 2
with nothing written."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

import numpy as np
import pytest
import zarr
from helpers import read_png, run_cli, tree_digest

s3fs = pytest.importorskip("s3fs")
pytest.importorskip("moto")

BUCKET = "ident3d"
RENDER = ["render", "--scene", "causal3dident", "--resolution", "16", "--samples", "1", "--seed", "7", "--no-progress"]
N, CHUNK = 24, 4  # evaluate needs 20 finished rows


@dataclass(frozen=True)
class Server:
    """A running local S3 server: its endpoint, the access key of a user allowed every S3 action, and that of a user
    who may list, write and delete objects but not read them (write-only credentials, e.g. an upload role)."""

    endpoint: str
    key: str
    secret: str
    writer_key: str
    writer_secret: str

    def env(self, key: str | None = None, secret: str | None = None) -> dict[str, str]:
        """The AWS environment a user sets for this server (``key``/``secret`` replace the good credentials)."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": key or self.key,
                "AWS_SECRET_ACCESS_KEY": secret or self.secret, "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_up(endpoint: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    """Block until the server answers HTTP (or fail with its exit)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, "the S3 server exited at start"
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the S3 server did not start")


def _provision(endpoint: str) -> list[str]:
    """Create the bucket, a user allowed s3:* and a write-only one, each with an access key, then switch
    authentication on (every later request must be signed with a known key and allowed by its user's policy):
    returns both keys and secrets."""
    import boto3

    admin = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "setup",
             "aws_secret_access_key": "setup"}
    iam, keys = boto3.client("iam", **admin), []
    for user, actions in (("ident3d", "s3:*"), ("writer", ["s3:PutObject", "s3:DeleteObject", "s3:ListBucket"])):
        iam.create_user(UserName=user)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
        iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        keys += [key["AccessKeyId"], key["SecretAccessKey"]]
    boto3.client("s3", **admin).create_bucket(Bucket=BUCKET)
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                                  headers={"Content-Type": "text/plain"})).read()
    return keys


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A moto S3 server subprocess on a free port of 127.0.0.1 for this module; stopped at the end."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    log = open(tmp_path_factory.mktemp("moto") / "server.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", endpoint.rsplit(":", 1)[1]],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_up(endpoint, proc)
        yield Server(endpoint, *_provision(endpoint))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _set_env(mp: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """Point this process (and the processes it starts) at ``env``'s S3; forget S3 clients made for another."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        mp.delenv(name, raising=False)
    for name, value in env.items():
        mp.setenv(name, value)
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture
def s3(server, monkeypatch):
    """This test's environment points at the local server with good credentials."""
    _set_env(monkeypatch, server.env())
    yield server
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="module")
def stores(server, tmp_path_factory):
    """The same render twice: to S3 on a 2-process Dask LocalCluster, and to disk in this process (other chunks);
    returns (URL, local path). The command runs in an empty folder that must stay empty (no URL taken for a path)."""
    here = tmp_path_factory.mktemp("stores")
    cwd, local = here / "cwd", here / "c3d.zarr"
    cwd.mkdir()
    url = f"s3://{BUCKET}/c3d.zarr"
    with pytest.MonkeyPatch.context() as mp:
        _set_env(mp, server.env())
        r = run_cli(*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 2, "--out", url, cwd=cwd)
        assert r.returncode == 0 and f"-> {url}" in r.stdout, r.stderr
        assert not any(cwd.iterdir())
        r = run_cli(*RENDER, "--n", N, "--chunk-size", 8, "--workers", 1, "--out", local)
        assert r.returncode == 0, r.stderr
        s3fs.S3FileSystem.clear_instance_cache()
    return url, local


def fs() -> "s3fs.S3FileSystem":
    """An S3 file system with the environment's credentials, without cached listings (one per environment: _set_env
    forgets it)."""
    return s3fs.S3FileSystem(use_listings_cache=False)


def objects(prefix: str) -> dict[str, str]:
    """Every object below ``prefix`` (``bucket/key``) with its ETag: equal maps mean nothing was written."""
    return {p: info["ETag"] for p, info in fs().find(prefix, detail=True).items()}


def arrays(path: str, rows: slice = slice(None)) -> dict[str, np.ndarray]:
    """Every per-row array of a store (a path or URL) at ``rows``, after checking that every chunk is done."""
    g = zarr.open_group(str(path), mode="r")
    assert g["done"][:].all(), path
    return {name: a[rows] for name, a in g.arrays() if name != "done"}


def assert_same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    """The same arrays with bit-identical values (and dtypes)."""
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and np.array_equal(a[name], b[name]), name


def one_line(r, code=2) -> str:
    """The command failed with ``code`` and exactly one stderr line, no traceback; returns that line."""
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code and len(lines) == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    return lines[0]


def test_render_to_s3_is_bit_identical_to_disk(s3, stores):
    url, local = stores
    keys = objects(f"{BUCKET}/c3d.zarr")
    assert f"{BUCKET}/c3d.zarr/zarr.json" in keys and f"{BUCKET}/c3d.zarr/images/c/5/0/0/0" in keys
    got = arrays(url)
    assert sorted(got) == ["classes", "images", "latents"] and got["images"].std() > 10
    assert zarr.open_group(url)["done"].shape == (N // CHUNK,)
    assert_same_arrays(arrays(local), got)
    a, b = dict(zarr.open_group(url).attrs), dict(zarr.open_group(str(local)).attrs)
    assert {k for k in a if a[k] != b.get(k)} == {"created", "chunk_size"} and a["chunk_size"] == CHUNK
    r = run_cli(*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 2, "--out", url)
    assert r.returncode == 0 and "nothing to do" in r.stdout and objects(f"{BUCKET}/c3d.zarr") == keys


def test_killed_render_resumes_to_the_same_store(s3, stores, tmp_path):
    """SIGKILL of the render process (and its group) mid-run; re-running renders exactly the chunks not done."""
    url, local = f"s3://{BUCKET}/killed.zarr", stores[1]
    args = [*RENDER, "--n", 8, "--chunk-size", 1, "--workers", 1, "--out", url]
    proc = subprocess.Popen([sys.executable, "-m", "ident3d.pipelines.cli", *map(str, args)], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flags, deadline, done = f"{BUCKET}/killed.zarr/done/c", time.time() + 120, 0
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                done = len(fs().ls(flags))  # a done flag is one object (a cleared one is not stored)
            except FileNotFoundError:
                done = 0
            if 1 <= done < 8:
                break
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    flags_now = zarr.open_group(url, mode="r")["done"][:]
    assert 1 <= flags_now.sum() < 8, f"could not kill mid-run (done={flags_now})"
    finished = {k: fs().cat_file(f"{BUCKET}/killed.zarr/images/c/{k}/0/0/0") for k in np.flatnonzero(flags_now)}
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert f"rendered {8 - flags_now.sum()} chunks" in r.stdout and f"{flags_now.sum()} chunks were already done" \
        in r.stdout, r.stdout
    assert_same_arrays(arrays(local, slice(0, 8)), arrays(url))  # a row is the same however many there are
    for k, data in finished.items():  # finished chunks were not written again
        assert fs().cat_file(f"{BUCKET}/killed.zarr/images/c/{k}/0/0/0") == data


def test_check_finds_and_repair_clears_damaged_chunks(s3, stores):
    url, local = f"s3://{BUCKET}/damaged.zarr", stores[1]
    fs().copy(f"{BUCKET}/c3d.zarr", f"{BUCKET}/damaged.zarr", recursive=True)
    root = f"{BUCKET}/damaged.zarr"
    fs().pipe(f"{root}/images/c/1/0/0/0", b"garbage")
    fs().rm(f"{root}/images/c/3/0/0/0")
    fs().pipe(f"{root}/latents/c/4/0", b"xx")
    fs().pipe(f"{root}/done/c/2", b"xx")
    line = one_line(run_cli(*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 1, "--out", url))
    assert line.startswith(f"ident3d render: error: {url}: chunk 2 of done is corrupt"), line  # named by its URL
    r = run_cli("check", url, "--no-progress")
    assert r.returncode == 1, r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("chunk ")] == [
        "chunk 1: images: RuntimeError: Zstd decompression error: invalid input data",
        "chunk 2: done: RuntimeError: Zstd decompression error: invalid input data",
        "chunk 3: images: chunk file missing (reads as zeros)",
        "chunk 4: latents: RuntimeError: Zstd decompression error: invalid input data"]
    r = run_cli("check", url, "--repair", "--no-progress")
    assert r.returncode == 1 and "repaired: cleared the done flags of chunks 1-4" in r.stdout, r.stdout
    left = objects(root)
    assert f"{root}/images/c/1/0/0/0" not in left and f"{root}/latents/c/4/0" not in left
    assert f"{root}/images/c/4/0/0/0" in left and f"{root}/latents/c/1/0" in left  # only damaged files go
    assert list(np.flatnonzero(zarr.open_group(url, mode="r")["done"][:])) == [0, 5]
    r = run_cli(*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 1, "--out", url)
    assert r.returncode == 0 and "rendered 4 chunks" in r.stdout, r.stderr
    assert run_cli("check", url, "--no-progress").returncode == 0
    assert_same_arrays(arrays(local), arrays(url))
    line = one_line(run_cli("check", f"{url}/images"))
    assert line.endswith(f"is the array 'images' inside the store {url}, not a store; give the store: "
                         f"ident3d check {url}"), line


def test_show_train_evaluate_export_read_s3(s3, stores, tmp_path):
    url, local = stores
    r = run_cli("show", url, "--out", tmp_path / "grid.png")
    assert r.returncode == 0 and url in r.stdout and "24 x 16x16 RGB, 6/6 chunks done" in r.stdout, r.stderr
    h, w, colours = read_png(tmp_path / "grid.png")
    assert h > 100 and w > 100 and colours > 50
    for name, data, workers in (("s3", url, 1), ("disk", local, 0)):  # a DataLoader worker process reads S3 too
        r = run_cli("train", "--data", data, "--out", tmp_path / f"run_{name}", "--encoder", "cnn", "--steps", 2,
                    "--batch-size", 8, "--num-workers", workers, "--no-progress")
        assert r.returncode == 0, r.stderr
    losses = [[json.loads(ln)["loss"] for ln in (tmp_path / f"run_{n}" / "metrics.jsonl").read_text().splitlines()]
              for n in ("s3", "disk")]
    assert losses[0] == losses[1] and len(losses[0]) >= 1  # the same batches and views, bit for bit
    r = run_cli("evaluate", "--run", tmp_path / "run_s3", "--data", url, "--out", tmp_path / "report.json")
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["test_store"] == url and report["n_fit"] + report["n_score"] == N
    # a run trained on an S3 store is compared with the test store as one trained on disk is
    other = tmp_path / "3dident.zarr"
    assert run_cli("render", "--scene", "3dident", "--n", 8, "--resolution", 16, "--samples", 1, "--workers", 1,
                   "--no-progress", "--out", other).returncode == 0
    line = one_line(run_cli("evaluate", "--run", tmp_path / "run_s3", "--data", other))
    assert "but the run was trained on Teapot" in line and url in line, line
    for name, data in (("s3", url), ("disk", local)):
        r = run_cli("export", data, "--format", "causal3dident", "--out", tmp_path / f"export_{name}")
        assert r.returncode == 0, r.stderr
    assert tree_digest(tmp_path / "export_s3") == tree_digest(tmp_path / "export_disk")
    assert len(list((tmp_path / "export_s3").rglob("*.png"))) == N


def test_open_store_reads_s3(s3, stores):
    import ident3d

    url, local = stores
    view, ref = ident3d.open_store(url), ident3d.open_store(str(local))
    assert view.complete and view.n == N and view.latent_names == ref.latent_names
    assert np.array_equal(view.images(), ref.images()) and np.array_equal(view.latents(), ref.latents())
    assert np.array_equal(view.images([3, 17, 5]), ref.images([3, 17, 5]))
    assert np.array_equal(view.dask("classes").compute(scheduler="threads"), ref.classes())
    assert np.array_equal(view.to_xarray()["latents"].values, ref.latents())


def test_missing_bucket_and_bad_credentials_are_one_line_and_write_nothing(s3, stores, monkeypatch, tmp_path):
    url = stores[0]
    before, buckets = objects(BUCKET), fs().ls("")
    line = one_line(run_cli(*RENDER, "--n", 8, "--workers", 1, "--out", "s3://no-such-bucket/x.zarr"))
    assert "the bucket s3://no-such-bucket of s3://no-such-bucket/x.zarr does not exist" in line, line
    for key, secret in ((None, "wrong-secret"), ("AKIAUNKNOWNKEY000000", "x")):  # a wrong secret, an unknown key
        _set_env(monkeypatch, s3.env(key, secret))
        for args in ([*RENDER, "--n", 8, "--workers", 1, "--out", f"s3://{BUCKET}/new.zarr"],
                     [*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 1, "--out", url, "--overwrite"],
                     ["check", url], ["show", url], ["export", url, "--format", "causal3dident", "--out", tmp_path / "x"],
                     ["train", "--data", url, "--out", tmp_path / "run", "--steps", 1, "--no-progress"]):
            line = one_line(run_cli(*args))
            assert "was denied" in line and "AWS_ACCESS_KEY_ID" in line and "AWS_ENDPOINT_URL" in line, (args, line)
    # credentials that may delete and write but not read: the finished store must not be taken for missing
    _set_env(monkeypatch, s3.env(s3.writer_key, s3.writer_secret))
    line = one_line(run_cli(*RENDER, "--n", N, "--chunk-size", CHUNK, "--workers", 1, "--out", url))
    assert line.startswith(f"ident3d render: error: access to {url} was denied (PermissionError: Forbidden)"), line
    _set_env(monkeypatch, s3.env())
    assert objects(BUCKET) == before and fs().ls("") == buckets and not any(tmp_path.iterdir())


def test_a_prefix_holding_other_data_is_never_replaced(s3):
    fs().pipe(f"{BUCKET}/data/notes.txt", b"keep me")
    line = one_line(run_cli(*RENDER, "--n", 8, "--workers", 1, "--out", f"s3://{BUCKET}/data"))
    assert line.endswith(f"s3://{BUCKET}/data is a non-empty folder that is not a store; choose another --out"), line
    line = one_line(run_cli(*RENDER, "--n", 8, "--workers", 1, "--out", f"s3://{BUCKET}/data/notes.txt"))
    assert line.endswith("exists and is a file, not a store; choose another --out"), line
    line = one_line(run_cli("show", f"s3://{BUCKET}/data"))
    assert line.endswith(f"s3://{BUCKET}/data is not a Zarr store (no zarr.json); render one with `ident3d render`")
    assert list(objects(f"{BUCKET}/data")) == [f"{BUCKET}/data/notes.txt"]
    assert fs().cat_file(f"{BUCKET}/data/notes.txt") == b"keep me"
