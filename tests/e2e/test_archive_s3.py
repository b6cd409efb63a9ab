"""provisioning.job.archive against moto's S3 server on 127.0.0.1: sha256 on every object, the
manifest, multipart for large files, idempotent reruns, retries through 503 SlowDown answers."""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import fake_credentials, start_moto  # noqa: E402

from provisioning.job.archive import MANIFEST_NAME, ArchiveError, archive_run, make_client  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.needs("s3")]
VENV_BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


@pytest.fixture(scope="module")
def moto(monkeypatch_module):
    server = start_moto(VENV_BIN)
    for k, v in fake_credentials(server.endpoint).items():
        monkeypatch_module.setenv(k, v)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "20261129T1630Z-box-gloo-cpu"
    (d / "raw" / "bandwidth").mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"schema_version": 1, "run_id": d.name}))
    (d / "results.csv").write_text("stage,case,metric,value\nbandwidth,x,busbw,1.5\n")
    (d / "raw" / "bandwidth" / "all_reduce_perf.txt").write_text("# nccl-tests output\n")
    (d / "raw" / "bandwidth" / "empty.log").write_bytes(b"")
    # 12 MiB of incompressible bytes: three 5 MiB parts at a 5 MiB threshold (S3's smallest part).
    (d / "raw" / "trace.bin").write_bytes(os.urandom(12 * 1024**2))
    return d


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bucket(client, name: str) -> str:
    client.create_bucket(Bucket=name)
    return name


def test_every_object_carries_its_sha256_and_the_manifest_lists_them(moto, run_dir):
    client = make_client(moto.endpoint)
    b = bucket(client, "archive-basic")
    report = archive_run(
        run_dir,
        f"s3://{b}/team/runs",
        endpoint_url=moto.endpoint,
        multipart_threshold=5 * 1024**2,
        multipart_chunk=5 * 1024**2,
        say=lambda s: None,
    )
    prefix = f"team/runs/{run_dir.name}/"
    local = {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    objects = client.list_objects_v2(Bucket=b, Prefix=prefix)["Contents"]
    assert {o["Key"][len(prefix) :] for o in objects} == set(local) | {MANIFEST_NAME}
    for rel, data in local.items():
        obj = client.get_object(Bucket=b, Key=prefix + rel)
        assert obj["Metadata"]["sha256"] == sha(data) == sha(obj["Body"].read()), rel
    # The large file went up in parts: S3's ETag of a multipart object ends in -<parts>.
    assert client.head_object(Bucket=b, Key=prefix + "raw/trace.bin")["ETag"].strip('"').endswith("-3")
    manifest = json.loads(client.get_object(Bucket=b, Key=prefix + MANIFEST_NAME)["Body"].read())
    assert manifest["run_id"] == run_dir.name
    assert {f["path"]: (f["size"], f["sha256"]) for f in manifest["files"]} == {
        rel: (len(data), sha(data)) for rel, data in local.items()
    }
    assert len(report.uploaded) == len(local) + 1 and report.skipped == []


def test_rerun_skips_what_is_there_and_uploads_what_changed(moto, run_dir):
    client = make_client(moto.endpoint)
    b = bucket(client, "archive-rerun")
    archive_run(run_dir, f"s3://{b}/p", endpoint_url=moto.endpoint, say=lambda s: None)
    again = archive_run(run_dir, f"s3://{b}/p", endpoint_url=moto.endpoint, say=lambda s: None)
    assert again.uploaded == []
    (run_dir / "results.csv").write_text("stage,case,metric,value\nbandwidth,x,busbw,2.5\n")
    third = archive_run(run_dir, f"s3://{b}/p", endpoint_url=moto.endpoint, say=lambda s: None)
    assert third.uploaded == [f"p/{run_dir.name}/results.csv", f"p/{run_dir.name}/{MANIFEST_NAME}"]


class Throttler(BaseHTTPRequestHandler):
    """Forwards to moto, but answers every other PUT with 503 SlowDown, as S3 does under load."""

    # HTTP/1.1, as S3 speaks it: "100 Continue" answers botocore's Expect header at once (an HTTP/1.0
    # server leaves it waiting 1 s before every PUT's body). Every response has a Content-Length.
    protocol_version = "HTTP/1.1"

    upstream: tuple[str, int]
    puts = 0
    refused = 0
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def _forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if self.command == "PUT":
            with Throttler.lock:
                Throttler.puts += 1
                refuse = Throttler.puts % 2 == 1
                Throttler.refused += refuse
            if refuse:
                payload = (
                    b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
                )
                self.send_response(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection",)}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward


def test_throttling_answers_are_retried_until_the_archive_is_whole(moto, run_dir, monkeypatch):
    from botocore.retries.standard import ExponentialBackoff

    # botocore's backoff after a throttling answer is rand(0, 1) s × 2^attempt; 1/20 of that here (its
    # base for other errors): the same retries, to the same end, without ~7 s of sleeping.
    monkeypatch.setattr(
        ExponentialBackoff,
        "_DEFAULT_BACKOFF_CONFIG",
        {**ExponentialBackoff._DEFAULT_BACKOFF_CONFIG, "throttling_base_scale": 0.05},
    )
    Throttler.upstream = ("127.0.0.1", moto.port)
    Throttler.puts = Throttler.refused = 0
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Throttler)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{proxy.server_address[1]}"
        client = make_client(moto.endpoint)
        b = bucket(client, "archive-throttled")
        report = archive_run(
            run_dir,
            f"s3://{b}/p",
            endpoint_url=endpoint,
            multipart_threshold=5 * 1024**2,
            multipart_chunk=5 * 1024**2,
            say=lambda s: None,
        )
    finally:
        proxy.shutdown()
    assert Throttler.refused >= 5  # every file's first PUT (and the large file's first part) was refused
    prefix = f"p/{run_dir.name}/"
    for p in run_dir.rglob("*"):
        if p.is_file():
            obj = client.get_object(Bucket=b, Key=prefix + p.relative_to(run_dir).as_posix())
            assert sha(obj["Body"].read()) == sha(p.read_bytes())
    assert len(report.uploaded) == 6


def test_a_missing_bucket_is_an_error_that_says_what_to_do(moto, run_dir):
    with pytest.raises(ArchiveError, match="NoSuchBucket: create the bucket"):
        archive_run(run_dir, "s3://no-such-bucket-here/p", endpoint_url=moto.endpoint, say=lambda s: None)


def test_bucket_name_too_short(run_dir):
    with pytest.raises(ArchiveError, match="at least 3 characters"):
        archive_run(run_dir, "s3://ab/p", say=lambda s: None)


def test_archive_to_a_folder_is_checked_and_idempotent(run_dir, tmp_path):
    dest = tmp_path / "archive-folder"
    first = archive_run(run_dir, str(dest), say=lambda s: None)
    second = archive_run(run_dir, str(dest), say=lambda s: None)
    assert len(first.uploaded) == 5 and second.uploaded == [] and len(second.skipped) == 5
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert (dest / run_dir.name / p.relative_to(run_dir)).read_bytes() == p.read_bytes()
    assert json.loads((dest / run_dir.name / MANIFEST_NAME).read_text())["run_id"] == run_dir.name
