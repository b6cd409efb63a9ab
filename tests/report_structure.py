"""The report's structure as text: what tests/data/report_structure.golden.txt pins (asv's habit).

The structure lists, in document order, the sections, headings, identity labels, banners, the first
screen's stage lines and attention items, the comparison's verdict board rows and every table's
caption, headers, row count and whether it is folded, of the synthetic run's
report and comparison. Figures and notes are left out: they depend on which stages' figure
modules exist. tests/unit/test_report_golden.py compares it with the checked-in file; only
`python -m tests.update_golden` (or `make golden`) writes that file.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from reports.compare import render_compare
from reports.report import render_path
from tests.report_synthetic import build_run

GOLDEN = Path(__file__).resolve().parent / "data" / "report_structure.golden.txt"
REGENERATE = "python -m tests.update_golden"


class Structure(HTMLParser):
    """Collects the structural lines; text is gathered only inside the elements that carry structure."""

    CAPTURE = {"h1", "h2", "h3", "caption", "th", "dt"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.stack: list[str] = []
        self.buffer: list[str] = []
        self.headers: list[str] = []
        self.caption = ""
        self.rows = 0
        self.in_board = False
        self.board_cells: list[str] = []
        self.in_banner = False
        self.folded = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.lines.append(f"section #{attrs.get('id')}")
        if tag == "tr" and "stage-line" in (attrs.get("class") or ""):
            status = (attrs.get("class") or "").replace("stage-line", "").strip()
            self.lines.append(f"  stage-line: {status} {attrs.get('data-stage')}")
        if tag == "p" and attrs.get("data-box"):
            self.lines.append(f"  box: {attrs.get('data-box')}")
        if tag == "li" and attrs.get("data-check"):
            self.lines.append(f"  attention: {attrs.get('class')} {attrs.get('data-check')}")
        if tag == "details" and "table" in (attrs.get("class") or ""):
            self.folded = True
        if tag == "table":
            self.headers, self.caption, self.rows = [], "", 0
            self.in_board = "board" in (attrs.get("class") or "")
        if tag == "tr":
            self.board_cells = []
        if tag == "td" and self.in_board:
            self.buffer = []
            self.stack.append("td")
        if tag == "p" and "banner" in (attrs.get("class") or ""):
            self.in_banner, self.buffer = True, []
        if tag in self.CAPTURE:
            self.stack.append(tag)
            self.buffer = []

    def handle_endtag(self, tag):
        text = " ".join("".join(self.buffer).split())
        if tag in self.CAPTURE and self.stack and self.stack[-1] == tag:
            self.stack.pop()
            if tag in ("h1", "h2", "h3"):
                self.lines.append(f"  {tag}: {text}")
            elif tag == "dt":
                self.lines.append(f"  identity: {text}")
            elif tag == "caption":
                self.caption = text
            elif tag == "th":
                self.headers.append(text)
        if tag == "td" and self.in_board and self.stack and self.stack[-1] == "td":
            self.stack.pop()
            self.board_cells.append(text)
        if tag == "tr" and self.headers and not self.stack:
            if self.board_cells:
                status, stage, vid = self.board_cells[1], self.board_cells[0], self.board_cells[2]
                self.lines.append(f"    board: {status} {stage} {vid}")
            self.rows += 1
        # the first screen's stage lines are listed above
        if tag == "table" and (self.headers or self.caption):
            folded = " folded" if self.folded else ""
            self.lines.append(
                f"  table: {self.caption or '(board)'} | {' | '.join(self.headers)} | rows={self.rows - 1}"
                f"{folded}"
            )
        if tag == "table":
            self.in_board = False
        if tag == "details":
            self.folded = False
        if tag == "p" and self.in_banner:
            self.lines.append(f"  banner: {text}")
            self.in_banner = False

    def handle_data(self, data):
        if self.stack or self.in_banner:
            self.buffer.append(data)


def structure(html: str) -> list[str]:
    parser = Structure()
    parser.feed(html)
    return parser.lines


def current_structure(tmp_path: Path) -> str:
    a = build_run(tmp_path / "run-a")
    b = build_run(tmp_path / "run-b", hostname="box-b", bandwidth_scale=1.3, gpu=False)
    report, _ = render_path(a)
    compared, _ = render_compare([a, b], tmp_path / "compare.html")
    lines = ["# report.html of tests/report_synthetic.py's run"] + structure(
        report.read_text(encoding="utf-8")
    )
    lines += ["", "# compare.html of that run (a) and a rehearsal of it with 1.3× the bandwidth (b)"]
    lines += structure(compared.read_text(encoding="utf-8"))
    return "\n".join(lines) + "\n"


def golden_problem(current: str, golden: Path = GOLDEN) -> str | None:
    """Why `current` does not match the checked-in golden text, or None when it does. Never writes:
    a missing golden file is a failure, not a first run."""
    if not golden.exists():
        return f"{golden} is missing: run `{REGENERATE}` (or `make golden`), review it and commit it"
    if current != golden.read_text(encoding="utf-8"):
        return (
            f"the report's structure differs from {golden.name}; if the change is intended, run "
            f"`{REGENERATE}` (or `make golden`) and review the diff"
        )
    return None
