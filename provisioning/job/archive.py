"""Archive a run directory: s3://bucket/prefix/<run-id>/ (any S3-compatible endpoint) or a folder.

    python -m provisioning archive runs/20261129T1630Z-box-nccl-gpu s3://my-bucket/cardtime python -m
    provisioning archive runs/20261129T1630Z-box-nccl-gpu s3://b/p --endpoint-url http://127.0.0.1:9000

Every file goes to <prefix>/<run-id>/<relative path> with its sha256 in the object's metadata
(x-amz-meta-sha256); `archive-manifest.json` (path, size, sha256 of every object) goes last, so
its presence means the archive is whole. Large files go up in parts (boto3's transfer manager);
throttling and 5xx answers are retried with exponential backoff (botocore's `standard` retry
mode, then a whole-file retry); a rerun skips objects already there with the same size and
sha256. Credentials come from the laptop's usual boto3 chain and never leave the laptop.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from suite import env_settings
from suite.inert import inert

MANIFEST_NAME = "archive-manifest.json"
MULTIPART_THRESHOLD = 64 * 1024**2  # bytes; S3's smallest part is 5 MiB, so 64 MiB keeps part counts low
MULTIPART_CHUNK = 64 * 1024**2
FILE_ATTEMPTS = 4  # whole-file retries on top of botocore's per-request ones: waits 1, 2, 4 s
# Answers no retry can fix: fail at once with what to do.
FATAL_CODES = {
    "NoSuchBucket": "create the bucket or correct ARCHIVE=s3://bucket/prefix",
    "AccessDenied": "the laptop's credentials may not write there: check AWS_PROFILE / the bucket policy",
    "InvalidAccessKeyId": "the access key is unknown to this endpoint: check the credentials and "
    "AWS_ENDPOINT_URL",
    "SignatureDoesNotMatch": "the secret key is wrong for this access key: check the credentials",
}
SKIP_SUFFIXES = (".part",)  # a fetch cut off half-way


class ArchiveError(RuntimeError):
    """The archive could not be written; the message says which object and what to do."""


@dataclass(frozen=True)
class FileEntry:
    path: str
    size: int
    sha256: str


@dataclass
class ArchiveReport:
    destination: str
    entries: list[FileEntry]
    uploaded: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"archived {len(self.entries)} files to {self.destination}: {len(self.uploaded)} uploaded, "
            f"{len(self.skipped)} already there with the same sha256"
        )


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scan(run_dir: Path) -> list[FileEntry]:
    """Every regular file of the run directory, sorted, with size and sha256."""
    out = []
    for p in sorted(run_dir.rglob("*")):
        if (
            p.is_file()
            and not p.is_symlink()
            and not p.name.endswith(SKIP_SUFFIXES)
            and p.name != MANIFEST_NAME
        ):
            out.append(FileEntry(p.relative_to(run_dir).as_posix(), p.stat().st_size, sha256_file(p)))
    return out


def manifest_json(run_dir: Path, entries: list[FileEntry]) -> str:
    # Deterministic (no timestamp): a rerun over the same files finds the same manifest and skips it.
    return json.dumps({"run_id": run_dir.name, "files": [e.__dict__ for e in entries]}, indent=1) + "\n"


def parse_s3(dest: str) -> tuple[str, str]:
    """s3://bucket/some/prefix → ("bucket", "some/prefix")."""
    rest = dest[len("s3://") :]
    bucket, _, prefix = rest.partition("/")
    if len(bucket) < 3:
        raise ArchiveError(
            f"ARCHIVE={dest}: no bucket name (S3 bucket names have at least 3 characters): "
            "use ARCHIVE=s3://bucket/prefix"
        )
    return bucket, prefix.strip("/")


BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")  # S3's bucket naming rules
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
LOCAL_PROVIDERS_ONLY = ("iam-role", "container-role")  # asked over the network: not before the run


def check_destination(dest: str, endpoint_url: str | None = None) -> None:
    """ARCHIVE=, its endpoint and the laptop's credentials, checked before the first connection to a box: a
    typo found after an hour of billed stages costs the archive, not the run, but is still found too late."""
    if not dest:
        return
    if not dest.startswith("s3://"):
        if SCHEME.match(dest) and not dest.startswith("file://"):
            raise ArchiveError(f"ARCHIVE={inert(dest)}: write s3://bucket/prefix or a folder")
        return
    bucket, _ = parse_s3(dest)
    if not BUCKET.fullmatch(bucket):
        raise ArchiveError(
            f"ARCHIVE={inert(dest)}: {inert(bucket)!r} is not an S3 bucket name "
            "(3–63 lower-case letters, digits, dots and hyphens)"
        )
    problem = env_settings.problem({"AWS_ENDPOINT_URL": endpoint_url or ""})
    if problem:
        raise ArchiveError(problem.replace("AWS_ENDPOINT_URL=", "ENDPOINT_URL=", 1))
    import botocore.session

    session = botocore.session.get_session()
    resolver = session.get_component("credential_provider")
    for name in LOCAL_PROVIDERS_ONLY:
        if resolver.get_provider(name) is not None:
            resolver.remove(name)
    if resolver.load_credentials() is None:
        raise ArchiveError(
            f"ARCHIVE={inert(dest)}: no S3 credentials on this machine (AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws/credentials): set them, or leave ARCHIVE "
            "empty to keep the run in the local folder only"
        )


def make_client(endpoint_url: str | None = None):
    import boto3
    from botocore.config import Config

    config = Config(retries={"max_attempts": 8, "mode": "standard"}, connect_timeout=10, read_timeout=120)
    # endpoint_url None lets boto3 read AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3 itself.
    return boto3.client("s3", endpoint_url=endpoint_url or None, config=config)


def archive_run(
    run_dir: Path,
    dest: str,
    *,
    endpoint_url: str | None = None,
    client=None,
    multipart_threshold: int = MULTIPART_THRESHOLD,
    multipart_chunk: int = MULTIPART_CHUNK,
    say=print,
) -> ArchiveReport:
    run_dir = Path(run_dir)
    if not (run_dir / "manifest.json").is_file():
        raise ArchiveError(f"{run_dir} is not a run directory (no manifest.json): pass runs/<run-id>")
    if client is None:  # a client handed in was made and checked by its caller
        check_destination(dest, endpoint_url)
    entries = scan(run_dir)
    if dest.startswith("s3://"):
        return _to_s3(run_dir, entries, dest, endpoint_url, client, multipart_threshold, multipart_chunk, say)
    return _to_folder(run_dir, entries, Path(dest.removeprefix("file://")), say)


def _to_s3(run_dir, entries, dest, endpoint_url, client, threshold, chunk, say) -> ArchiveReport:
    from boto3.exceptions import S3UploadFailedError
    from boto3.s3.transfer import TransferConfig
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, prefix = parse_s3(dest)
    base = f"{prefix}/{run_dir.name}" if prefix else run_dir.name
    client = client or make_client(endpoint_url)
    transfer = TransferConfig(multipart_threshold=threshold, multipart_chunksize=chunk)
    report = ArchiveReport(destination=f"s3://{bucket}/{base}/", entries=entries)
    manifest_path = None
    for entry in [*entries, None]:
        if entry is None:  # the manifest, last: its presence means every object above is there
            manifest_path = run_dir.parent / f".{run_dir.name}.{MANIFEST_NAME}"
            manifest_path.write_text(manifest_json(run_dir, entries))
            path, key, digest, size = (
                manifest_path,
                f"{base}/{MANIFEST_NAME}",
                sha256_file(manifest_path),
                manifest_path.stat().st_size,
            )
        else:
            path, key, digest, size = run_dir / entry.path, f"{base}/{entry.path}", entry.sha256, entry.size
        if _same_object(client, bucket, key, size, digest):
            report.skipped.append(key)
            continue
        for attempt in range(1, FILE_ATTEMPTS + 1):
            try:
                client.upload_file(
                    str(path), bucket, key, ExtraArgs={"Metadata": {"sha256": digest}}, Config=transfer
                )
                break
            except (BotoCoreError, ClientError, S3UploadFailedError) as e:
                fatal = next((c for c in FATAL_CODES if c in str(e)), None)
                if fatal:
                    raise ArchiveError(
                        f"uploading to s3://{bucket}/{key}: {fatal}: {FATAL_CODES[fatal]}"
                    ) from None
                if attempt == FILE_ATTEMPTS:
                    raise ArchiveError(
                        f"uploading {path} to s3://{bucket}/{key} failed {attempt} times: {e}; "
                        "rerun the same command: objects already up are skipped"
                    ) from None
                time.sleep(2 ** (attempt - 1))
        report.uploaded.append(key)
    if manifest_path is not None:
        manifest_path.unlink(missing_ok=True)
    say(report.summary())
    return report


def _same_object(client, bucket: str, key: str, size: int, digest: str) -> bool:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        head = client.head_object(Bucket=bucket, Key=key)
    except BotoCoreError as e:  # no endpoint answering, no credentials: no retry of ours fixes it
        raise ArchiveError(f"cannot reach s3://{bucket}/: {e}") from None
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return False
        raise ArchiveError(
            f"cannot read s3://{bucket}/{key}: {e}: check the credentials and ARCHIVE bucket"
        ) from None
    return head.get("ContentLength") == size and head.get("Metadata", {}).get("sha256") == digest


def _to_folder(run_dir: Path, entries: list[FileEntry], folder: Path, say) -> ArchiveReport:
    target = folder / run_dir.name
    report = ArchiveReport(destination=str(target), entries=entries)
    for e in entries:
        dest = target / e.path
        if dest.is_file() and dest.stat().st_size == e.size and sha256_file(dest) == e.sha256:
            report.skipped.append(e.path)
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".part")
        shutil.copyfile(run_dir / e.path, tmp)
        if sha256_file(tmp) != e.sha256:
            raise ArchiveError(f"{dest}: copy differs from the source; check the disk and rerun")
        tmp.replace(dest)
        report.uploaded.append(e.path)
    (target / MANIFEST_NAME).write_text(manifest_json(run_dir, entries))
    say(report.summary())
    return report
