"""A capture as people paste it: the shell prompt line above the output, and the marks of an excerpt.

    root@node-3:~# nvidia-smi topo -m        ← a prompt line: dropped, the output below is whole
    ....                                     ← an excerpt mark on its own line: dropped, the capture is
                                             partial
    GPU UUID : GPU-5269b708-...              ← a value written with `...`: the capture was edited, partial
    > [ 8.1] NVRM: Xid (PCI:0000:9b:00): 79   ← every line quoted (`> `, as an email or an issue quotes it):
                                                the quote marks dropped, the output read as it was printed

`clean(text)` gives the text the parsers read and, for an excerpt, why it is partial. A partial capture is
judged on what it holds and said to be partial (suite ingest and suite parse exit 1 without --allow-partial),
never read as "nothing usable" nor as a whole output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TOOLS = r"(?:sudo\s+)?(?:nvidia-smi|dcgmi|ibstat|ibv_devinfo|dmesg|journalctl|\S*_perf|mpirun)\b"
# `user@host:~/dir# cmd`, `[user@host dir]$ cmd`, `(venv) user@host:~$ cmd`, `$ cmd`, `# nvidia-smi …`, and
# the bare command echoed above its output (`nvidia-smi nvlink -s`, as issues paste it)
PROMPT = re.compile(
    r"^\s*(?:(?:\([^)]*\)\s*)?(?:\S+@\S+?(?::\S*)?\s?[#$%>]|\[\S+@[^\]]+\]\s?[#$%]|[$%]|#(?=\s*"
    + TOOLS
    + r"))\s+\S|"
    + TOOLS
    + r"[^|]*$)"
)
EXCERPT_LINE = re.compile(
    r"^\s*(?:\.{3,}|…+|\[\s*(?:\.{3}|…)\s*\]|\(\s*(?:\.{3}|…)\s*\)|<\s*snip\s*>|\[\s*snip\s*\]"
    r"|\[\s*(?:\d+\s+)?(?:more\s+)?lines?\s+(?:omitted|removed|trimmed|snipped)\s*\])\s*$",
    re.IGNORECASE,
)
ELIDED_VALUE = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]*-?(?:\.{3}|…)|UUID:\s*(?:\.{3}|…)|:\s*(?:\.{3}|…)\s*$")


@dataclass
class Pasted:
    text: str
    """The output with prompt lines and excerpt marks blanked (each line keeps its number)."""
    partial: list[str] = field(default_factory=list)
    """Why the capture is not the whole output (empty: it is)."""
    notes: list[str] = field(default_factory=list)
    """What was dropped that loses nothing (a prompt line)."""


QUOTE = re.compile(r"^[ \t]*>[ \t]?")


def unquoted(text: str) -> tuple[str, int]:
    """The text with the quote marks every non-blank line carries removed (nested `> > ` too), and how many
    levels there were; a text with one unquoted line is left as it is (`>` is also a prompt and a
    redirection)."""
    levels = 0
    while True:
        lines = text.splitlines(keepends=True)
        if not any(line.strip() for line in lines) or not all(
            QUOTE.match(line) for line in lines if line.strip()
        ):
            return text, levels
        text = "".join(QUOTE.sub("", line, count=1) if line.strip() else line for line in lines)
        levels += 1


def clean(text: str) -> Pasted:
    text, quoted = unquoted(text)
    kept: list[str] = []
    marks: list[int] = []
    elided: list[int] = []
    prompts: list[int] = []
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        bare = line.rstrip("\r\n")
        # a dropped line leaves its line break: the parsers' line numbers stay the file's
        ending = line[len(bare) :]
        if EXCERPT_LINE.match(bare):
            marks.append(number)
            kept.append(ending)
            continue
        if PROMPT.match(bare) and not kept_output(kept):
            prompts.append(number)  # only above the output: a `#` inside it is the tool's own
            kept.append(ending)
            continue
        if ELIDED_VALUE.search(bare):
            elided.append(number)
        kept.append(line)
    out = Pasted("".join(kept))
    if quoted:
        out.notes.append("quoted: every line began `> `; the quote marks dropped")
    if prompts:
        out.notes.append(f"shell prompt line {prompts[0]} dropped: the output starts below it")
    if marks:
        out.partial.append(
            f"an excerpt: lines left out at line {', '.join(map(str, marks[:5]))}"
            f"{' …' if len(marks) > 5 else ''} (`....`/`[...]`)"
        )
    if elided:
        out.partial.append(
            f"edited: a value written `...` at line {', '.join(map(str, elided[:5]))}"
            f"{' …' if len(elided) > 5 else ''}"
        )
    return out


def kept_output(kept: list[str]) -> bool:
    """Whether tool output has started (a prompt line is looked for above it only)."""
    return any(line.strip() for line in kept)
