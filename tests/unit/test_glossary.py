"""The docs define the terms they borrow from the seed article (issue 31, item 13): the collection ships a glossary
(docs/glossary.md) that defines each term below, and every document that cites the seed article links it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COLLECTION_DOCS = ROOT / "collections" / "ansible_collections" / "inference" / "blueprints" / "docs"
GLOSSARY = COLLECTION_DOCS / "glossary.md"
DOCS = sorted(
    [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "collections" / "ansible_collections" / "inference" / "blueprints").glob("README.md"),
        *(ROOT / "collections" / "ansible_collections" / "inference" / "blueprints" / "roles").glob("*/README.md"),
        *COLLECTION_DOCS.glob("*.md"),
    ]
)
# terms of the seed article the docs use, as the glossary writes them in bold where it defines them
TERMS = (
    "P/D disaggregation", "Prefill", "Decode", "TTFT", "TPOT", "Goodput", "KV cache", "Prefix caching",
    "Chunked prefill", "NIXL", "LMCache", "Mooncake", "OffloadingConnector", "EPP / inference scheduler",
    "InferencePool, InferenceObjective", "CP, DCP, PCP", "TP, PP, DP, EP", "MoE", "EPLB", "Gated DeltaNet (GDN)",
    "Speculative decoding", "EAGLE-3", "MTP", "ModelCar", "PinnedImageSet", "KEDA", "SNO", "Model cascade",
    "Seed article (\"seed 002\")",
)  # fmt: skip
SEED_CITATION = re.compile(r"seed (002|article|section|\d\.\d)|the seed's|\(seed:", re.IGNORECASE)


@pytest.mark.parametrize("term", TERMS)
def test_the_glossary_defines_the_term(term):
    assert f"**{term}" in GLOSSARY.read_text(encoding="utf-8")


def test_every_blueprint_is_in_the_glossary():
    text = GLOSSARY.read_text(encoding="utf-8")
    shipped = GLOSSARY.parent.parent / "blueprints"
    for blueprint in sorted(p.stem for p in shipped.glob("*.yml")):
        assert f"| `{blueprint}` |" in text, blueprint


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_document_citing_the_seed_article_links_the_glossary(doc):
    text = doc.read_text(encoding="utf-8")
    if doc == GLOSSARY or not SEED_CITATION.search(text):
        return
    assert "glossary.md#seed-article" in text, f"{doc.relative_to(ROOT)} cites the seed article without the glossary"
    assert not re.search(r"\(seed 002[,)]", text), "a bare 'seed 002' citation: say what the reader needs and link it"
