"""Every relative link in the user-facing pages resolves: the file exists and, for a ``#fragment``
into a markdown page, a heading with that GitHub anchor exists. The README is short and points
into ``docs/`` and ``results/``: a page moved or a heading renamed must not leave a dead link."""

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from helpers import ROOT

PAGES = sorted(
    {ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "notebooks" / "README.md"}
    | set((ROOT / "docs").glob("*.md"))
    | set((ROOT / "results").rglob("*.md"))
)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(text: str) -> list[str]:
    """Markdown link targets outside code blocks and inline code."""
    text = CODE.sub("", FENCE.sub("", text))
    return LINK.findall(text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped (hyphens and
    underscores kept), spaces to hyphens."""
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    s = re.sub(r"[^\w\- ]", "", s.replace("`", ""))
    return s.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            k = seen.get(s, 0)
            out.add(s if k == 0 else f"{s}-{k}")  # GitHub numbers repeated headings
            seen[s] = k + 1
    return out


def test_slug_matches_github():
    assert slug("No information, no advantage: ties and failed judgments") == (
        "no-information-no-advantage-ties-and-failed-judgments"
    )
    assert slug('Results on the warm start (issue 14: "Table 2 that answers")') == (
        "results-on-the-warm-start-issue-14-table-2-that-answers"
    )
    assert slug("Fidelity study (`make fidelity`)") == "fidelity-study-make-fidelity"


def test_links_are_found_outside_code_only():
    text = "[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n![d](e.png)"
    assert links(text) == ["x.md", "e.png"]


def test_the_readme_fits_on_a_screen_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make demo" in text and "make test" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    bad = []
    for target in links(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, frag = unquote(target).partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: no heading #{frag} in {dest.relative_to(ROOT)}")
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


GLOSSARY_TERMS = ("SCR", "AGR", "CARA", "PRC", "σ_group", "σ_noise", "SNR", "oracle", "anchor", "Kendall τ")
PAPERS = {
    "ArenaRL": "2601.06487",
    "RRC": "2608.06310",
    "Reasoning Arena": "2606.09380",
    "Writing-Zero": "2506.00103",
}


def test_glossary_defines_the_terms_and_the_readme_links_it():
    glossary = (ROOT / "docs" / "glossary.md").read_text()
    for term in GLOSSARY_TERMS:
        assert f"**{term}" in glossary, f"docs/glossary.md does not define {term}"
    assert "(docs/glossary.md)" in (ROOT / "README.md").read_text()


def test_the_four_papers_are_cited_with_their_arxiv_ids():
    for page in ("README.md", "docs/glossary.md", "docs/constructors.md"):
        text = (ROOT / page).read_text()
        for name, arxiv in PAPERS.items():
            assert name in text and arxiv in text, f"{page}: {name} (arXiv {arxiv}) not cited"
