"""A capture's bytes as the text they hold, for the captures that come off real machines in another dress:
a gzipped `kern.log.1.gz` from logrotate, a UTF-16 file saved by a Windows editor or PowerShell (`>` writes
UTF-16LE with a BOM there), a UTF-8 BOM, CRLF line ends, and a log with a hole of NUL bytes where the machine
crashed mid-write (the events around the hole are what the renter needs). Pure: bytes in, text and a note out.
"""

from __future__ import annotations

import codecs
import re
import zlib
from dataclasses import dataclass

from suite.parsers.traces import GZIP_MAGIC

# as much as the suite reads of a plain file
from suite.regular_files import (
    MAX_READ_BYTES as INFLATED_MAX_BYTES,
)

_NUL_RUN = re.compile(rb"\x00+")


@dataclass(frozen=True)
class Decoded:
    text: str
    note: str = ""
    """What was undone to read it ('gzip', 'UTF-16', 'a NUL hole of 4096 bytes'), '' for plain UTF-8."""


class NotText(ValueError):
    """Bytes that claim a dress (the gzip magic) and do not hold it; the message says what is wrong."""


def inflate(raw: bytes) -> bytes:
    """A gzip stream's content; a stream cut short gives what it holds, a corrupt one or one inflating past
    INFLATED_MAX_BYTES raises NotText."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, INFLATED_MAX_BYTES)
    except zlib.error as e:
        raise NotText(f"gzip data that does not inflate ({e})") from None
    if inflater.unconsumed_tail:
        raise NotText(f"gzip data inflating past {INFLATED_MAX_BYTES >> 30} GiB")
    return out


def utf16_codec(raw: bytes) -> str | None:
    """'utf-16' for a UTF-16 BOM, 'utf-16-le'/'-be' for BOM-less text whose every other byte is NUL; else
    None."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    sample = raw[:4096]
    if len(sample) >= 8 and len(sample) % 2 == 0:
        if sample[1::2].count(0) > 0.9 * len(sample) / 2 and sample[0::2].count(0) < 0.1 * len(sample) / 2:
            return "utf-16-le"
        if sample[0::2].count(0) > 0.9 * len(sample) / 2 and sample[1::2].count(0) < 0.1 * len(sample) / 2:
            return "utf-16-be"
    return None


def decode(raw: bytes) -> Decoded:
    """The text `raw` holds; notes say what was undone. Undecodable UTF-8 bytes become U+FFFD, as before."""
    notes = []
    if raw.startswith(GZIP_MAGIC):
        raw = inflate(raw)
        notes.append("gzip")
    codec = utf16_codec(raw)
    if codec:
        text = raw.decode(codec, errors="replace")
        notes.append("UTF-16")
    else:
        holes = [len(m.group()) for m in _NUL_RUN.finditer(raw)] if b"\0" in raw else []  # a fast no first
        if holes:  # a crash mid-write leaves zeros where lines were: each run of them ends the line before it
            raw = _NUL_RUN.sub(b"\n", raw)
            notes.append(f"{len(holes)} NUL hole(s) of {sum(holes)} bytes closed")
        text = raw.decode("utf-8", errors="replace")
    return Decoded(text.lstrip("\ufeff"), ", ".join(notes))


def looks_binary(raw: bytes) -> bool:
    """Bytes no decoding here makes into text: NULs spread through them, not in runs (an executable, an
    image)."""
    sample = raw[:4096]
    if not sample or utf16_codec(sample) or sample.startswith(GZIP_MAGIC):
        return False
    return sample.count(0) > 0 and sum(1 for m in _NUL_RUN.finditer(sample)) > 8
