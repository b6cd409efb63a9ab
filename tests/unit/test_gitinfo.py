"""The one git lookup: a checkout's HEAD, or nothing outside one; the image's commit where there is no
.git."""

from __future__ import annotations

import subprocess

from suite import gitinfo


def git(repo, *args):
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def make_repo(path):
    path.mkdir()
    git(path, "init", "-q")
    (path / "f.txt").write_text("one\n")
    git(path, "add", "f.txt")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return path


def test_head_commit_of_a_checkout_and_of_none(tmp_path):
    repo = make_repo(tmp_path / "repo")
    assert gitinfo.head_commit(repo) == git(repo, "rev-parse", "HEAD")
    assert len(gitinfo.head_commit(repo)) == 40
    plain = tmp_path / "plain"
    plain.mkdir()
    assert gitinfo.head_commit(plain) is None


def test_suite_checkout_says_dirty_and_falls_back_to_the_image_commit(tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "repo")
    monkeypatch.setattr(gitinfo, "SUITE_TREE", repo)
    assert gitinfo.suite_checkout() == {"commit": git(repo, "rev-parse", "HEAD"), "dirty": False}
    (repo / "f.txt").write_text("two\n")
    assert gitinfo.suite_checkout()["dirty"] is True

    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setattr(gitinfo, "SUITE_TREE", plain)
    monkeypatch.setenv("CARDTIME_COMMIT", "abc123")
    assert gitinfo.suite_checkout() == {"commit": "abc123", "dirty": None}
    monkeypatch.delenv("CARDTIME_COMMIT")
    assert gitinfo.suite_checkout() == {"commit": "unknown", "dirty": None}


def test_the_image_build_records_the_same_commit(tmp_path):
    from provisioning.runtime.images import commit_buildargs

    repo = make_repo(tmp_path / "repo")
    assert commit_buildargs(repo) == {"CARDTIME_COMMIT": git(repo, "rev-parse", "HEAD")}
    plain = tmp_path / "plain"
    plain.mkdir()
    assert commit_buildargs(plain) == {"CARDTIME_COMMIT": "unknown"}
    assert commit_buildargs(plain, "abc123") == {"CARDTIME_COMMIT": "abc123"}
