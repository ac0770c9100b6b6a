"""Every relative link in README.md and docs/*.md points at a file that exists (and, with an anchor,
at a heading of that file), so the one-page README and the per-part pages cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out, fence = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", title)))
    return out


def _links(path: Path) -> list[str]:
    text, fence, out = path.read_text(), False, []
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence:
            out += LINK.findall(line)
    return [u for u in out if not re.match(r"[a-z]+:", u)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    bad = []
    for url in _links(page):
        target, _, anchor = url.partition("#")
        dest = (page.parent / target).resolve() if target else page
        if not dest.exists():
            bad.append(f"{url} (no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest})")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{url} (no heading #{anchor} in {dest.name})")
    assert not bad, f"{page.relative_to(ROOT)}: broken links: {bad}"


def test_link_checker_catches_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Title\n\n[ok](#title) [bad](missing.md) [anchor](#nope)\n")
    links = _links(page)
    assert links == ["#title", "missing.md", "#nope"]
    assert "title" in _anchors(page) and "nope" not in _anchors(page)
