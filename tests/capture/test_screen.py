"""Screen capture end to end under Xvfb: real windows, real mss grabs, real tesseract, real store."""

from __future__ import annotations

import random

import pytest

from capture.runner import Capture, set_pause
from tests.capture.xdisplay import frame_files
from tests.conftest import files_containing

WORDS = ["violet", "harbor", "lantern", "meadow", "copper", "falcon", "quartz", "willow", "summit", "canyon",
         "orchid", "marble", "thunder", "saffron", "glacier", "pepper", "walnut", "ribbon", "cactus", "meteor"]
# Words that only ever appear in windows that must not be captured.
SECRET_WORDS = ["badger", "crimson", "dolphin", "emerald", "fossil", "gondola", "hazel", "igloo", "jasmine", "kettle"]


def sentence(n: int = 6, words: list[str] = WORDS) -> str:
    """A sentence unlikely to be on screen by accident."""
    return " ".join(random.sample(words, n))


def norm(text: str) -> str:
    return " ".join(text.lower().split())


@pytest.fixture
def capture(store, display, ocr):
    cap = Capture(store, audio=False, ocr=ocr)
    yield cap
    cap.stop()


def evidence(store) -> list[dict]:
    return store.list("evidence", limit=1000)


def test_window_sentence_becomes_evidence_with_app_and_title(capture, store, display, mirador_home):
    text = sentence()
    display.window("Quarterly notes - draft.txt", text, klass="scribbler")
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1, [r["text"] for r in evidence(store)]
    row = rows[0]
    assert row["source"] == "screen"
    assert row["app"] == "Scribbler"  # WM_CLASS class of the Tk window
    assert row["window"] == "Quarterly notes - draft.txt"
    assert row["frame_path"] and (mirador_home / row["frame_path"]).is_file()
    assert row["frame_path"].endswith(".webp")
    # Unchanged text across frames is not stored again.
    capture.run_cycles(2)
    assert len([r for r in evidence(store) if norm(text) in norm(r["text"])]) == 1


def test_static_screen_twenty_cycles_at_most_one_ocr(capture, display):
    display.window("Static page", sentence())
    outcomes = capture.run_cycles(20)
    h = capture.health.snapshot()
    assert h["frames_ocrd"] <= 1
    assert outcomes.count("unchanged") >= 19
    assert h["frames_grabbed"] == 20 and h["frames_skipped"] >= 19
    assert h["errors"] == 0


@pytest.mark.parametrize("title,klass", [
    ("KeePassXC - Passwords.kdbx", "scribbler"),  # caught by the title pattern
    ("Vault", "bitwarden"),  # caught by the app name (WM_CLASS)
    ("New Private Browsing - Mozilla Firefox", "scribbler"),
])
def test_password_manager_window_is_never_grabbed(capture, store, display, mirador_home, title, klass):
    display.window("Ordinary editor", sentence())
    capture.run_cycles(2)
    frames_before = frame_files(mirador_home)
    grabbed_before = capture.health.snapshot()["frames_grabbed"]
    assert frames_before, "the ordinary window should have produced a thumbnail"

    secret_text = sentence(words=SECRET_WORDS)
    display.window(title, secret_text, klass=klass)
    outcomes = capture.run_cycles(5)

    assert outcomes == ["excluded"] * 5
    h = capture.health.snapshot()
    assert h["frames_grabbed"] == grabbed_before, "an excluded window must not even be grabbed"
    assert h["frames_excluded"] == 5
    assert frame_files(mirador_home) == frames_before, "no frame file may be written while it is active"
    assert not any(norm(secret_text) in norm(r["text"]) for r in evidence(store))
    for word in SECRET_WORDS:
        assert not files_containing(mirador_home, word), f"{word!r} from the excluded window is in a file"


def test_secrets_on_screen_are_redacted_everywhere(capture, store, display, mirador_home):
    aws, card = "AKIAIOSFODNN7EXAMPLE", "4111 1111 1111 1111"
    display.window("deploy notes", f"aws key {aws}\ncard {card}\nrotate before friday")
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if "rotate" in r["text"]]
    assert rows, [r["text"] for r in evidence(store)]
    text = rows[0]["text"]
    assert "[REDACTED:aws_key]" in text and "[REDACTED:card_number]" in text
    assert rows[0]["redactions"] >= 2
    assert rows[0]["meta"]["redacted"]["aws_key"] >= 1
    for raw in (aws, card, card.replace(" ", ""), "IOSFODNN7"):
        assert files_containing(mirador_home, raw) == [], f"{raw} leaked into a file"


def test_pause_resume_and_timed_pause(capture, store, display, mirador_home):
    display.window("Paused page", sentence())
    capture.pause()
    assert capture.run_cycles(3) == ["paused"] * 3
    assert capture.health.snapshot()["frames_grabbed"] == 0
    assert evidence(store) == []
    capture.resume()
    assert capture.run_cycles(1) == ["queued"]
    # Another process (`mirador pause --minutes`) pauses through the control file.
    set_pause(mirador_home, minutes=5)
    assert capture.step() == "paused"
    assert capture.health.paused_until is not None
    set_pause(mirador_home, paused=False)
    assert capture.step() in ("unchanged", "queued")


def test_thumbnails_are_sealed_and_open_only_with_the_key(capture, store, display, mirador_home):
    from io import BytesIO

    from PIL import Image

    from memory.store.core import Store
    from memory.store.keys import SEALED_MAGIC, KeyUnavailableError

    display.window("sealed frame check", sentence())
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if r["frame_path"]]
    assert rows
    for r in rows:
        blob = (mirador_home / r["frame_path"]).read_bytes()
        assert blob.startswith(SEALED_MAGIC) and b"WEBP" not in blob[:64] and b"RIFF" not in blob
        image = Image.open(BytesIO(store.frame_bytes(r["frame_path"])))
        assert image.format == "WEBP" and image.width > 0
    # Another folder's key (data-key.json replaced) opens nothing: a clear error, not garbage.
    elsewhere = Store(mirador_home.parent / "elsewhere")
    elsewhere.keys.key()  # made there, wrapped by the same passphrase
    (mirador_home / "data-key.json").write_bytes((mirador_home.parent / "elsewhere" / "data-key.json").read_bytes())
    other = Store(mirador_home)
    with pytest.raises(KeyUnavailableError, match="does not open"):
        other.frame_bytes(rows[0]["frame_path"])


def test_locked_capture_grabs_nothing_until_unlocked(capture, store, display, mirador_home):
    # What capture stores is sealed with the data key: while Mirador is locked it sees and writes nothing.
    store.keys.lock()
    text = sentence()
    display.window("while locked", text)
    assert capture.run_cycles(3) == ["paused"] * 3
    assert store.count("evidence", local=True) == 0
    assert frame_files(mirador_home) == set()
    assert capture.health.snapshot()["state"] == "locked" and capture.health.snapshot()["frames_grabbed"] == 0
    store.keys.unlock()
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1 and rows[0]["frame_path"] and frame_files(mirador_home)
