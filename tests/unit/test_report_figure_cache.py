"""The figure cache: a run's report rendered again reads its figures back instead of drawing them; new data, a
broken figure or CARDTIME_FIGURE_CACHE=off draws again."""

from __future__ import annotations

import json

import pytest

from reports import figures as figure_modules
from reports.report import render_path
from tests.report_synthetic import build_run


def drawn_none(*args, **kwargs):
    raise AssertionError("drawn although the cache holds this stage's figures")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("CARDTIME_FIGURE_CACHE", str(folder))
    return folder


def test_a_second_rendering_reads_the_figures_back(tmp_path, cache, monkeypatch):
    run = build_run(tmp_path / "run")
    first = render_path(run, tmp_path / "first.html")[0].read_text()
    entries = sorted(cache.glob("*.json"))
    assert len(entries) == 5 and first.count('<img src="data:image/svg+xml') >= 2  # one entry per stage
    monkeypatch.setattr(figure_modules, "stage_figures", drawn_none)
    second = render_path(run, tmp_path / "second.html")[0].read_text()
    assert second == first


def test_new_rows_draw_again(tmp_path, cache, monkeypatch):
    run = build_run(tmp_path / "run")
    render_path(run, tmp_path / "first.html")
    other = build_run(tmp_path / "other", bandwidth_scale=0.5)  # the same run but bandwidth measured lower
    monkeypatch.setattr(figure_modules, "stage_figures", drawn_none)
    with pytest.raises(AssertionError, match="drawn although"):
        render_path(other, tmp_path / "other.html")


def test_a_damaged_entry_or_no_cache_only_means_drawing(tmp_path, cache, monkeypatch):
    run = build_run(tmp_path / "run")
    first = render_path(run, tmp_path / "first.html")[0].read_text()
    for entry in cache.glob("*.json"):
        entry.write_text(json.dumps({"images": [{"src": 1}]})[:7])  # truncated
    assert render_path(run, tmp_path / "again.html")[0].read_text() == first
    monkeypatch.setenv("CARDTIME_FIGURE_CACHE", "off")
    assert render_path(run, tmp_path / "off.html")[0].read_text() == first
