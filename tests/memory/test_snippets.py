"""The lines of a long text that a query is about (recall summaries, MCP search results)."""

from __future__ import annotations

from memory.retrieval.snippets import focused, past_chrome, stems


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


def test_a_screen_without_shared_words_starts_past_its_chrome():
    screen = "File Edit Selection View Go Run Terminal Help\nmain.py x  README.md\nEXPLORER\n" \
             "Traceback (most recent call last):\n  File \"app.py\", line 3"
    assert past_chrome(screen) == "… Traceback (most recent call last):\n  File \"app.py\", line 3"
    assert past_chrome("The deploy failed at noon\nFile Edit") == "The deploy failed at noon\nFile Edit"
    only_chrome = "File Edit View\nOK Cancel"
    assert past_chrome(only_chrome) == only_chrome  # nothing better: as it is
    late = "\n".join(["Tab"] * 20 + ["the content comes too late to look for"])
    assert past_chrome(late) == late


def test_mcp_brief_of_a_screen_starts_past_its_chrome_but_a_chat_row_at_its_start():
    from memory.mcp.tools import SNIPPET_CHARS, _evidence_brief

    body = "File Edit View Go\nInbox Sent Drafts\n" + "the invoice for March is attached and due on Friday " * 20
    row = {"id": "ev_1", "scope": "work", "text": body}
    assert _evidence_brief({**row, "source": "screen"}, query_stems=stems("payment")).text.startswith("… the invoice")
    chat = _evidence_brief({**row, "source": "import"}, query_stems=stems("payment")).text
    assert chat.startswith("File Edit View Go") and len(chat) == SNIPPET_CHARS
