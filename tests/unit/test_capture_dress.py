"""Captures as they come off real machines: the same kernel log (a real XID 119 capture from an H100 box)
gzipped by logrotate, saved as UTF-16 by a Windows editor, with a UTF-8 BOM or CRLF line ends, or with a hole
of NUL bytes where the machine crashed mid-write — each read by `suite ingest` to the same XID events as the
plain file, and a file that only claims a dress (the gzip magic and garbage) named in one line, never a
traceback."""

from __future__ import annotations

import codecs
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from suite.ingest import inputs
from suite.ingest.decode import decode, looks_binary
from suite.parsers import xid

ROOT = Path(__file__).resolve().parents[2]
KERNEL_LOG = (ROOT / "tests" / "data" / "health" / "xid-01-h100-xe9680-xid119-gsp-timeout.txt").read_bytes()


def _with_nul_hole(raw: bytes) -> bytes:
    lines = raw.split(b"\n")
    half = len(lines) // 2
    return b"\n".join(lines[:half]) + b"\x00" * 4096 + b"\n".join(lines[half:])


DRESSES = {
    "plain": lambda raw: raw,
    "utf8-bom": lambda raw: codecs.BOM_UTF8 + raw,
    "crlf": lambda raw: raw.replace(b"\n", b"\r\n"),
    "utf16-bom": lambda raw: raw.decode().encode("utf-16"),
    "utf16le-no-bom": lambda raw: raw.decode().encode("utf-16-le"),
    "gzip": gzip.compress,
    "gzip-utf16": lambda raw: gzip.compress(raw.decode().encode("utf-16")),
    "nul-hole": _with_nul_hole,
}


def _events(text: str) -> list[tuple[str, int, str]]:
    return [(e["bus"], e["xid"], e["text"]) for e in xid.parse(text)["xid_events"]]


PLAIN_EVENTS = _events(KERNEL_LOG.decode())


@pytest.mark.parametrize("dress", sorted(DRESSES))
def test_each_dress_reads_to_the_plain_captures_xid_events(tmp_path, dress):
    path = tmp_path / f"kern-{dress}.log"
    path.write_bytes(DRESSES[dress](KERNEL_LOG))
    got = inputs.read(path)
    assert isinstance(got, list), got.line()
    (capture,) = got
    assert (capture.kind, capture.stage) == (xid.KIND, "health")
    assert len(PLAIN_EVENTS) > 3
    assert _events(decode(path.read_bytes()).text) == PLAIN_EVENTS


def test_the_events_on_both_sides_of_a_nul_hole_are_found():
    lines = KERNEL_LOG.split(b"\n")
    before, after = (
        _events(b"\n".join(lines[: len(lines) // 2]).decode()),
        _events(b"\n".join(lines[len(lines) // 2 :]).decode()),
    )
    assert before and after
    decoded = decode(_with_nul_hole(KERNEL_LOG))
    assert decoded.note == "1 NUL hole(s) of 4096 bytes closed"
    assert _events(decoded.text) == before + after


def test_decode_says_what_it_undid():
    assert decode(b"plain\n").note == ""
    assert decode(gzip.compress("é\n".encode("utf-16"))) == decode(b"\xc3\xa9\n").__class__(
        "é\n", "gzip, UTF-16"
    )


def test_binary_data_is_not_taken_for_text_in_a_dress():
    elf = b"\x7fELF\x02\x01\x01" + b"\x00" * 9 + b"\x02\x00\x3e\x00\x01\x00\x00\x00" * 40
    assert looks_binary(elf)
    assert not looks_binary(_with_nul_hole(KERNEL_LOG))
    assert not looks_binary(KERNEL_LOG.decode().encode("utf-16-le"))


@pytest.mark.parametrize(
    "content, why",
    [
        (b"\x1f\x8bnot gzip at all", "gzip data that does not inflate"),
        (gzip.compress(KERNEL_LOG)[:400], None),
    ],
)
def test_a_false_or_cut_gzip_is_named_in_one_line(tmp_path, content, why):
    path = tmp_path / "kern.log.gz"
    path.write_bytes(content)
    done = subprocess.run(
        [sys.executable, "-m", "suite", "ingest", str(path), "--out", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert "Traceback" not in done.stderr
    if why:  # refused: nothing else was given, so nothing usable (exit 2), the file named with its reason
        assert done.returncode == 2
        assert f"not used: {path}: unreadable: {why}" in done.stderr
    else:  # a stream cut short gives what it holds: the XID before the cut still rejects the box
        assert done.returncode == 1
        assert "box verdict: REJECT: health.kernel_log" in done.stderr
