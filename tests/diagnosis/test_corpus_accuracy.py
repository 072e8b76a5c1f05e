"""Accuracy of `classify-log` on real text people paste: the verbatim public excerpts under
tests/corpus/pastes (tool outputs, logs, fragments, prose; each with its source URL and the
layer an on-call engineer would assign).

Covers: every corpus file follows the format (a malformed one fails naming its path); the corpus
scores at least 0.9 overall; no healthy excerpt is given a fault. The accuracy table by layer and
by format is attached to the test report (`record_property`) and printed in the failure message.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.corpus.scoring import (
    CorpusError,
    Scored,
    accuracy,
    load_corpus,
    load_excerpt,
    misses,
    score,
    table,
)

THRESHOLD = 0.9


@pytest.fixture(scope="module")
def scored() -> list[Scored]:
    return score(load_corpus())


def test_every_corpus_file_follows_the_format() -> None:
    excerpts = load_corpus()  # raises CorpusError naming the file
    assert len(excerpts) >= 150  # issue 22: at least 150 excerpts, at least 30 healthy
    assert sum(e.layer == "none" for e in excerpts) >= 30
    assert len({e.format for e in excerpts}) >= 15
    assert len({e.source for e in excerpts}) >= len(excerpts) // 2


def test_a_malformed_file_fails_with_its_path(tmp_path: Path) -> None:
    bad = tmp_path / "proj" / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("source: https://example.org/x\nproject: a/b\nformat: kernel-log\ntext: x\n")
    with pytest.raises(CorpusError, match=r"bad\.yaml: missing keys \['kind', 'layer', 'why'\]"):
        load_excerpt(bad)


def test_corpus_accuracy_is_at_least_point_nine(
    scored: list[Scored], record_property: pytest.RecordProperty
) -> None:
    report = table(scored)
    record_property("corpus_accuracy", f"{accuracy(scored):.3f}")
    record_property("corpus_table", report)
    assert accuracy(scored) >= THRESHOLD, f"\n{report}\nmisses:\n{misses(scored)}"


def test_no_healthy_excerpt_is_given_a_fault(scored: list[Scored]) -> None:
    faulted = [s for s in scored if s.healthy_given_a_fault]
    assert not faulted, "\n".join(
        f"{s.excerpt.name}: healthy, given {s.got} ({s.signal})" for s in faulted
    )
