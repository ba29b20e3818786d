"""The lines of a long text that a query is about (recall summaries, MCP search results)."""

from __future__ import annotations

from memory.snippets import focused, stems


def test_picks_the_matching_lines_in_their_order():
    text = "File Edit View\n$ make deploy\nuploading layer 1\nError: certificate expired\nuploading layer 2\ndone"
    got = focused(text, stems("why did the deploy fail? which certificate expired"), 400)
    assert got == "… $ make deploy … Error: certificate expired …"
    assert stems("Failed failing fails") == {"fail"}


def test_no_shared_word_or_one_line_gives_nothing():
    assert focused("File Edit View\nsomething else", stems("certificate"), 400) is None
    assert focused("one line about the certificate", stems("certificate"), 400) is None
    assert focused("a\nb", frozenset(), 400) is None


def test_a_long_line_starts_near_its_first_match():
    line = " ".join(f"word{i} filler text here" for i in range(100)) + " the certificate for api.acme.dev expired"
    got = focused(line + "\nnext line", stems("which certificate expired?"), 400)
    assert got.startswith("… ") and "certificate for api.acme.dev expired" in got[:400]
    assert len(got) < len(line)
    short = "the certificate for api.acme.dev expired early " + "x " * 30
    assert focused(short + "\nnext line", stems("certificate"), 400).startswith("the certificate")
