"""Put exactly the local HEAD on the host: `git clone` of the origin when the host can reach it,
otherwise a `git bundle` pushed over SFTP (private repositories need no credentials there).

    local = local_checkout(Path("."), allow_dirty=False)    # refuses uncommitted changes
    code_dir = ship(remote, local, base)                     # <base>/code/<commit>, reused when present

A checkout on the host is made in a temporary folder and renamed into place, so a connection lost
half-way never leaves a half checkout that a later run would trust.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from provisioning.session.connection import Remote, RemoteError
from provisioning.session.shell import quote


class DirtyTree(RuntimeError):
    """Uncommitted changes: the host would not run what the laptop has."""


@dataclass(frozen=True)
class LocalCheckout:
    root: Path
    commit: str
    branch: str
    """The current branch name ('HEAD' when detached); recorded on the host as a label."""
    dirty: list[str]
    """`git status --porcelain` lines; empty for a clean tree."""
    origin: str | None
    """The URL of `origin` without any password or token in it, when there is one."""


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def without_credentials(url: str | None) -> str | None:
    """origin as the host may see it: no password or token. `https://user:token@host/r.git` and
    `https://token@host/r.git` → `https://host/r.git`; an ssh login name (`ssh://git@host/r`,
    `git@host:r`) is no secret and stays. A clone on the host would otherwise write the token
    into its .git/config and show it in its process list."""
    if not url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    authority, sep, path = rest.partition("/")
    if "@" not in authority:
        return url
    userinfo, host = authority.rsplit("@", 1)
    if scheme.lower() in ("http", "https", "ftp", "ftps"):
        return f"{scheme}://{host}{sep}{path}"
    return f"{scheme}://{userinfo.split(':', 1)[0]}@{host}{sep}{path}"


def local_checkout(start: Path, *, allow_dirty: bool) -> LocalCheckout:
    """The repository around `start` at HEAD; DirtyTree unless clean or allow_dirty (then a loud warning)."""
    try:
        root = Path(git(start, "rev-parse", "--show-toplevel"))
        commit = git(root, "rev-parse", "--verify", "HEAD^{commit}")
    except subprocess.CalledProcessError as e:
        raise DirtyTree(
            f"{start} is not a git repository with a commit ({e.stderr.strip()}): commit first"
        ) from None
    branch = git(root, "rev-parse", "--abbrev-ref", "HEAD")
    dirty = [l for l in git(root, "status", "--porcelain").splitlines() if l.strip()]
    try:
        origin = without_credentials(git(root, "remote", "get-url", "origin") or None)
    except subprocess.CalledProcessError:
        origin = None
    if dirty and not allow_dirty:
        shown = "\n  ".join(dirty[:10]) + ("\n  …" if len(dirty) > 10 else "")
        raise DirtyTree(
            f"the working tree has {len(dirty)} uncommitted change(s); the host gets HEAD {commit[:12]} "
            f"only:\n  {shown}\n"
            "commit them (or rerun with ALLOW_DIRTY=1 to run HEAD without them)"
        )
    if dirty:
        print(
            "!" * 72 + f"\nWARNING (ALLOW_DIRTY=1): {len(dirty)} uncommitted change(s) stay on this laptop; "
            f"the host runs HEAD {commit[:12]} WITHOUT them\n" + "!" * 72,
            file=sys.stderr,
            flush=True,
        )
    return LocalCheckout(root=root, commit=commit, branch=branch, dirty=dirty, origin=origin)


def code_dir_for(base: str, commit: str) -> str:
    return f"{base}/code/{commit}"


def checkout_is_ready(remote: Remote, code_dir: str, commit: str) -> bool:
    r = remote.run(["git", "-C", code_dir, "rev-parse", "HEAD"], check=False)
    return r.exit_code == 0 and r.stdout.strip() == commit


def origin_reachable(remote: Remote, origin: str | None) -> bool:
    """Whether the host can read `origin` without credentials or prompts (20 s at most)."""
    if not origin or origin.startswith(("/", "file:", ".")) or "://" not in origin and ":" not in origin:
        return False  # a local path on the laptop means nothing on the host
    r = remote.run(
        [
            "env",
            "GIT_TERMINAL_PROMPT=0",
            "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=10",
            "timeout",
            "20",
            "git",
            "ls-remote",
            "--",
            origin,
            "HEAD",
        ],
        check=False,
    )
    return r.exit_code == 0


def ship(remote: Remote, local: LocalCheckout, base: str, say=print) -> tuple[str, str]:
    """Make `<base>/code/<commit>` hold exactly HEAD; returns (code_dir, how: reused | clone | bundle)."""
    code_dir = code_dir_for(base, local.commit)
    if checkout_is_ready(remote, code_dir, local.commit):
        return code_dir, "reused"
    staging = f"{base}/code/.incoming-{local.commit}"
    remote.run(["rm", "-rf", "--", staging], what="cannot clear a stale staging folder")
    remote.run(["mkdir", "-p", "--", f"{base}/code"], what="cannot create the code folder")
    how = "bundle"
    if origin_reachable(remote, local.origin):
        r = remote.run(
            [
                "env",
                "GIT_TERMINAL_PROMPT=0",
                "git",
                "clone",
                "--quiet",
                "--no-checkout",
                "--",
                local.origin,
                staging,
            ],
            check=False,
        )
        has_commit = (
            r.exit_code == 0
            and remote.run(
                ["git", "-C", staging, "cat-file", "-e", local.commit + "^{commit}"], check=False
            ).exit_code
            == 0
        )
        if has_commit:
            how = "clone"
        else:
            say(f"origin has no commit {local.commit[:12]} (not pushed?): sending a bundle instead")
            remote.run(["rm", "-rf", "--", staging])
    if how == "bundle":
        bundle_path = f"{base}/code/.incoming-{local.commit}.bundle"
        send_checked(
            remote, local, ["bundle", "create", "--quiet", "{out}", "HEAD"], bundle_path, "git bundle", say
        )
        remote.run(
            ["git", "clone", "--quiet", "--no-checkout", "--", bundle_path, staging],
            what="git clone of the bundle failed",
        )
        remote.run(["rm", "-f", "--", bundle_path])
    remote.run(
        [
            "git",
            "-C",
            staging,
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--detach",
            local.commit,
        ],
        what=f"cannot check out {local.commit[:12]} on the host",
    )
    if local.branch and local.branch != "HEAD":
        # The laptop's branch name, as a label on the host's checkout (it may hold any character git allows).
        remote.run(
            ["git", "-C", staging, "update-ref", "refs/heads/" + local.branch, local.commit],
            what="cannot record the branch name",
        )
    remote.run(["rm", "-rf", "--", code_dir], what="cannot remove a broken checkout")
    remote.run(["mv", "-T", "--", staging, code_dir], what="cannot move the checkout into place")
    if not checkout_is_ready(remote, code_dir, local.commit):
        raise RemoteError(remote.label, f"{code_dir} does not hold {local.commit[:12]} after shipping")
    return code_dir, how


def send_checked(
    remote: Remote, local: LocalCheckout, git_args: list[str], dest: str, what: str, say=print
) -> None:
    """Make a file on the laptop with `git -C root GIT_ARGS` ({out}: the file) and put it at `dest` over
    SFTP, its sha256 checked on the host."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "payload"
        subprocess.run(
            ["git", "-C", str(local.root), *(a.replace("{out}", str(out)) for a in git_args)],
            check=True,
            capture_output=True,
        )
        digest = hashlib.sha256(out.read_bytes()).hexdigest()
        say(f"sending {what} ({out.stat().st_size / 1e6:.1f} MB) over SFTP")
        remote.sftp().put(str(out), dest)
    got = remote.run(["sha256sum", "--", dest], what=f"cannot checksum the {what}").stdout.split()[0]
    if got != digest:
        raise RemoteError(
            remote.label,
            f"the {what} arrived damaged (sha256 {got[:12]}…, sent {digest[:12]}…)",
            hint=f"rerun: the {what} is sent again",
        )


COMMIT_MARK = ".cardtime-commit"


def ship_files(remote: Remote, local: LocalCheckout, base: str, say=print) -> tuple[str, str]:
    """A host without git (a container pod): HEAD's files as a `git archive` tar made on the laptop,
    unpacked into `<base>/code/<commit>`, whose COMMIT_MARK, written last, says the folder is whole.
    Returns (code_dir, how: reused | archive)."""
    code_dir = code_dir_for(base, local.commit)
    mark = remote.run(["cat", "--", f"{code_dir}/{COMMIT_MARK}"], check=False)
    if mark.exit_code == 0 and mark.stdout.strip() == local.commit:
        return code_dir, "reused"
    staging = f"{base}/code/.incoming-{local.commit}"
    remote.run(["rm", "-rf", "--", staging, staging + ".tar"], what="cannot clear a stale staging folder")
    remote.run(["mkdir", "-p", "--", staging], what="cannot create the code folder")
    send_checked(
        remote,
        local,
        ["archive", "--format=tar", "-o", "{out}", local.commit],
        staging + ".tar",
        "archive of HEAD's files",
        say,
    )
    remote.run(["tar", "-xf", staging + ".tar", "-C", staging], what="cannot unpack the code on the host")
    remote.run(["rm", "-f", "--", staging + ".tar"])
    remote.run(
        f"printf '%s\\n' {local.commit} > {quote(staging + '/' + COMMIT_MARK)}", what="cannot mark the code"
    )
    remote.run(["rm", "-rf", "--", code_dir], what="cannot remove a broken checkout")
    remote.run(["mv", "-T", "--", staging, code_dir], what="cannot move the code into place")
    return code_dir, "archive"
