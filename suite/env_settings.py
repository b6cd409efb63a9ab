"""The environment variables cardtime reads, each checked before any work starts, with an error naming it.

A variable set by hand or inherited from a job script reaches a formula, a shell line or a host-list expansion
far from where it was read: `BURNIN_MIN=nan` planned "nan h" and exited 0,
`SLURM_JOB_NODELIST=n[1-99999999999]` was expanded into memory until killed, an unbalanced quote in
CARDTIME_SRUN_ARGS ended in "No closing quotation" naming nothing. `problem()` checks every one here first;
the places that read them keep their own parsing."""

from __future__ import annotations

import math
import os
import re
import shlex
from typing import Callable, Mapping

from suite.cluster import hostlist
from suite.inert import inert

MAX_VALUE_CHARS = 65536
MAX_BURNIN_MIN = 7 * 24 * 60.0  # a week: a longer burn-in is a typo (BURNIN_MIN=6000 for 60 min)
URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(:\d{1,5})?(/\S*)?")


class SettingError(ValueError):
    pass


def minutes(text: str, name: str = "BURNIN_MIN", high: float = MAX_BURNIN_MIN) -> float:
    """A finite number of minutes above 0 and at most `high`."""
    try:
        value = float(text)
    except ValueError:
        raise SettingError(f"{name}={shown(text)} is not a number of minutes (e.g. {name}=90)") from None
    if not math.isfinite(value) or not 0 < value <= high:
        raise SettingError(
            f"{name}={shown(text)}: a number of minutes above 0 and at most {high:g} is needed"
        )
    return value


def _host_list(text: str) -> None:
    try:
        hostlist.count(text)
    except hostlist.HostListError as e:
        raise SettingError(str(e)) from None


def _shell_words(text: str) -> None:
    try:
        shlex.split(text)
    except ValueError as e:  # "No closing quotation", "No escaped character"
        raise SettingError(f"{str(e).lower()}: quote the words as in a shell") from None


def _endpoint(text: str) -> None:
    if not URL.fullmatch(text):
        raise SettingError("not an endpoint URL: write http(s)://host[:port]")


def _absolute_folder(text: str) -> None:
    if not os.path.isabs(text):
        raise SettingError("a cache or home folder must be an absolute path")


def _on_off(text: str) -> None:
    if text not in ("on", "off", "1", "0"):
        raise SettingError("write on or off")


def _burnin(text: str) -> None:
    minutes(text)


def _library_file(text: str) -> None:
    """CARDTIME_LIBRARY: the library's SQLite file (suite/library/index.py), not a folder."""
    if os.path.isdir(text):
        raise SettingError(
            f"CARDTIME_LIBRARY={shown(text)} is a folder: name the library's file (…/library.sqlite)"
        )


CHECKS: dict[str, Callable[[str], None]] = {
    "BURNIN_MIN": _burnin,
    "SLURM_JOB_NODELIST": _host_list,
    "SLURM_NODELIST": _host_list,
    "CARDTIME_SRUN_ARGS": _shell_words,
    "AWS_ENDPOINT_URL": _endpoint,
    "AWS_ENDPOINT_URL_S3": _endpoint,
    "HOME": _absolute_folder,
    "XDG_CACHE_HOME": _absolute_folder,
    "CARDTIME_PREDRAW": _on_off,
    "CARDTIME_LIBRARY": _library_file,
}
"""Every variable the suite, its reports and the laptop's driver read from their own environment and that a
user sets (CARDTIME_FIGURE_CACHE is any folder or off; the workers' CARDTIME_RAW_DIR and the like are set by
the suite itself, and torchrun's by torchrun)."""


def shown(text: str) -> str:
    """The value as the error shows it: quoted, inert, cut to 60 characters."""
    return repr(inert(text[:60] + ("…" if len(text) > 60 else "")))


def problem(environ: Mapping[str, str] = os.environ) -> str | None:
    """The first variable set to something unusable, as one line naming it; None when every one is usable."""
    for name, check in CHECKS.items():
        text = environ.get(name)
        if not text:  # unset or empty: the default
            continue
        if len(text) > MAX_VALUE_CHARS:
            return f"{name} holds {len(text)} characters: more than any setting of it ({MAX_VALUE_CHARS})"
        try:
            check(text)
        except SettingError as e:
            message = str(e)
            return message if message.startswith(f"{name}=") else f"{name}={shown(text)}: {message}"
    return None
