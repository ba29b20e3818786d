"""Mirador's tuning of the embedder: merged exactly, only into the weights it was made for, once; and
a store keeps the embedder its vectors came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file

from memory.config import load_config
from memory.errors import MiradorError
from models import tuning
from models.embedder import Embedder
from models.locate import embedder_dir
from models.onnx_encoder import fingerprint

ROOT = Path(__file__).resolve().parents[2]
NAME = "encoder.layer.0.attention.self.query.weight"


def _delta(path: Path, base_fp: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    b, a = rng.normal(size=(384, 4)).astype(np.float32), rng.normal(size=(4, 384)).astype(np.float32) * 0.01
    tuning.write_delta(path, {"base_fingerprint": base_fp, "scale": 0.5, "rank": 4}, {NAME: (b, a)})
    return b, a


def test_delta_is_merged_exactly_and_only_once(tmp_path):
    base_dir = embedder_dir()
    b, a = _delta(tmp_path / "d.npz", fingerprint(base_dir / "model.safetensors"))
    out = tuning.tuned_dir(base_dir, tmp_path / "d.npz", tmp_path / "cache")
    base, merged = load_file(str(base_dir / "model.safetensors")), load_file(str(out / "model.safetensors"))
    want = base[NAME] + 0.5 * (b.astype(np.float16).astype(np.float32) @ a.astype(np.float16).astype(np.float32))
    assert np.allclose(merged[NAME], want, atol=1e-6) and not np.allclose(merged[NAME], base[NAME])
    assert all(np.array_equal(merged[k], base[k]) for k in base if k != NAME)
    assert (out / "tokenizer.json").exists() and (out / "1_Pooling" / "config.json").exists()
    made = (out / "model.safetensors").stat().st_mtime_ns
    assert tuning.tuned_dir(base_dir, tmp_path / "d.npz", tmp_path / "cache") == out
    assert (out / "model.safetensors").stat().st_mtime_ns == made  # reused, not rewritten
    # a merge a dead process left behind is cleared by the next merge; a fresh one (in progress) is not
    old, fresh = tmp_path / "cache" / "x.tmp-1", tmp_path / "cache" / "y.tmp-2"
    old.mkdir(), fresh.mkdir()
    os.utime(old, (0, 0))
    # another delta is another model
    _delta(tmp_path / "e.npz", fingerprint(base_dir / "model.safetensors"), seed=1)
    assert tuning.tuned_dir(base_dir, tmp_path / "e.npz", tmp_path / "cache") != out
    assert not old.exists() and fresh.exists()


def test_merging_needs_no_torch(tmp_path):
    _delta(tmp_path / "d.npz", fingerprint(embedder_dir() / "model.safetensors"))
    code = ("import sys; from models import tuning; from models.locate import embedder_dir\n"
            f"tuning.tuned_dir(embedder_dir(), __import__('pathlib').Path({str(tmp_path / 'd.npz')!r}), "
            f"__import__('pathlib').Path({str(tmp_path / 'c')!r}))\n"
            "print('torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_a_delta_for_other_weights_is_not_applied(tmp_path):
    _delta(tmp_path / "d.npz", "0" * 40)
    with pytest.raises(tuning.TuningMismatch, match="other weights"):
        tuning.tuned_dir(embedder_dir(), tmp_path / "d.npz", tmp_path / "cache")
    emb = Embedder(tuning=tmp_path / "d.npz")
    assert emb.tuning is None and emb.model_dir == emb.base_dir == embedder_dir()


def test_a_folder_without_weights_is_not_tuned(tmp_path):
    # A delta that names no base weights met a folder without any: the two "fingerprints" (None) matched, and
    # naming the merged copy failed with a TypeError instead of the mismatch every caller handles.
    tuning.write_delta(tmp_path / "d.npz", {"base_fingerprint": None, "scale": 0.5, "rank": 4}, {})
    (tmp_path / "model").mkdir()
    with pytest.raises(tuning.TuningMismatch, match="other weights"):
        tuning.tuned_dir(tmp_path / "model", tmp_path / "d.npz", tmp_path / "cache")


def test_a_missing_delta_embeds_as_shipped(tmp_path, caplog):
    emb = Embedder(tuning=tmp_path / "gone.npz")
    assert emb.tuning is None and emb.model_dir == embedder_dir()
    assert "unreadable" in caplog.text


PARAPHRASES = [("We chose PostgreSQL for the billing service", "The billing service will use PostgreSQL"),
               ("Sam prefers tabs over spaces", "Sam likes tabs more than spaces"),
               ("The staging kafka volume was full", "Kafka on staging ran out of disk space"),
               ("The API key rotates every 90 days", "API keys are rotated each 90 days")]
ANSWERS = [("What does they do to relax?", "Melanie: I've been painting a lot lately, it really calms me down.",
            "Melanie: Hey! So good to hear from you, how have you been?"),
           ("Why did they pick PostgreSQL?", "Sam: Postgres gives us transactions across the ledger tables.",
            "Sam: Morning all, standup in five."),
           ("What instrument does they play?", "Gina: I practised the violin for an hour before dinner.",
            "Gina: Wow, that sounds great!")]


def test_bundled_delta_fits_the_bundled_model_and_keeps_its_sense_of_similarity():
    meta, pairs = tuning.read_delta(tuning.BUNDLED)
    assert meta["base_fingerprint"] == fingerprint(embedder_dir() / "model.safetensors")
    assert len(pairs) == 36 and tuning.BUNDLED.stat().st_size < 4_000_000
    tuned, plain = Embedder(tuning=tuning.BUNDLED, threads=1), Embedder(threads=1)
    assert tuned.model_dir != plain.model_dir and "+tuned-" in tuned.name
    texts = [t for triple in ANSWERS for t in triple]
    t, p = tuned.embed(texts), plain.embed(texts)
    assert np.allclose(np.linalg.norm(t, axis=1), 1.0, atol=1e-4)
    assert not np.allclose(t, p, atol=1e-3) and (np.sum(t * p, axis=1) > 0.7).all()  # tuned, not another model
    for k in range(0, len(texts), 3):  # an answer still beats small talk
        assert t[k] @ t[k + 1] > t[k] @ t[k + 2]
    # The dream's merge and corroborate thresholds (cosine 0.95, 0.9) were set on the model as shipped.
    for a, b in PARAPHRASES:
        (ta, tb), (pa, pb) = tuned.embed([a, b]), plain.embed([a, b])
        assert abs(float(ta @ tb) - float(pa @ pb)) < 0.05


def _record(home: Path) -> dict:
    return json.loads((home / "embedder.json").read_text())


def test_a_new_store_embeds_tuned_and_records_it(mirador_home):
    from memory.store.core import Store

    store = Store(mirador_home)
    assert store.embedder.tuning == tuning.BUNDLED
    assert _record(mirador_home) == {"tuned": True, "weights": store.embedder.model_dir.name,
                                     "embedder": store.embedder.name}
    assert Store(mirador_home).embedder is store.embedder


def test_a_store_keeps_the_embedder_it_was_made_with(mirador_home):
    from memory.store.core import EvidenceSpec, Store

    (mirador_home).mkdir(parents=True)
    (mirador_home / "config.toml").write_text("[models]\nembedder_tuning = false\n")
    store = Store(mirador_home)
    assert store.embedder.tuning is None and _record(mirador_home)["tuned"] is False
    (mirador_home / "config.toml").write_text("[models]\nembedder_tuning = true\n")
    assert load_config(mirador_home).models.embedder_tuning
    assert Store(mirador_home).embedder.tuning is None  # its vectors are untuned: it stays so

    # A store made before tuning existed has rows and no record: its rows were embedded as shipped.
    store.add_evidence_batch([EvidenceSpec(text="the deploy failed", source="import")], actor="import")
    (mirador_home / "embedder.json").unlink()
    again = Store(mirador_home)
    assert again.embedder.tuning is None and _record(mirador_home)["tuned"] is False
    from memory.retrieval.search import search_evidence

    assert [h.row["text"] for h in search_evidence(again, "deploy failed", limit=1)] == ["the deploy failed"]


def test_a_damaged_record_says_what_to_do(mirador_home):
    from memory.store.core import Store

    mirador_home.mkdir(parents=True)
    (mirador_home / "embedder.json").write_text("{not json")
    with pytest.raises(MiradorError, match="embedder.json is damaged"):
        Store(mirador_home)
    (mirador_home / "embedder.json").write_text('{"embedder": "x"}')
    with pytest.raises(MiradorError, match="no 'tuned' flag"):
        Store(mirador_home)


def test_a_store_tuned_by_another_delta_is_flagged(mirador_home, caplog):
    from memory.store.core import Store

    mirador_home.mkdir(parents=True)
    (mirador_home / "embedder.json").write_text('{"tuned": true, "weights": "older-delta"}')
    store = Store(mirador_home)
    assert store.embedder.tuning == tuning.BUNDLED
    assert "older-delta" in caplog.text and "match poorly" in caplog.text


def _earlier_release(tmp_path: Path) -> Path:
    """A real delta other than the bundled one: the bundled with B halved, as a release before might ship."""
    meta, pairs = tuning.read_delta(tuning.BUNDLED)
    earlier = tmp_path / "earlier_release.npz"
    tuning.write_delta(earlier, {k: v for k, v in meta.items() if k != "weights"},
                       {n: (b.astype(np.float32) * 0.5, a) for n, (b, a) in pairs.items()})
    return earlier


def test_a_store_tuned_by_an_earlier_release_keeps_that_model_while_it_is_cached(
        mirador_home, tmp_path, monkeypatch, caplog):
    """After an upgrade that ships a new delta, the old merged copy is still in the cache: the model
    the store's vectors came from. The store keeps it until `mirador reembed`, rather than searching
    with a model its vectors do not match."""
    import shutil

    from desktop.cli.doctor import check_embedder
    from memory.retrieval.search import search_evidence
    from memory.store.core import EvidenceSpec, Store, write_embedder_record

    monkeypatch.setattr(tuning, "default_dir", lambda: tmp_path / "tuned")
    mirador_home.mkdir(parents=True)
    (mirador_home / "config.toml").write_text("[models]\nembedder_onnx = false\n")  # torch (the dev extra): no graph to build
    then = Embedder(tuning=_earlier_release(tmp_path), use_onnx=False)  # the last release's embedder
    store = Store(mirador_home, embedder=then)
    write_embedder_record(mirador_home, then)
    store.add_evidence_batch([EvidenceSpec(text=t, source="import", scope="work") for t in
                              ("the deploy failed because the token expired", "lunch was good today")],
                             actor="import")

    caplog.clear()
    upgraded = Store(mirador_home)
    assert upgraded.embedder.model_dir == then.model_dir and upgraded.embedder.tuning is None
    assert "earlier tuning" in caplog.text and "mirador reembed" in caplog.text
    q = "why did the deploy fail?"
    np.testing.assert_allclose(upgraded.embedder.embed_query(q), then.embed_query(q), atol=1e-5)
    hits = search_evidence(upgraded, "the deploy failed because the token expired", scopes=["work"], limit=2)
    assert hits[0].row["text"].startswith("the deploy failed")
    status, msg, fix = check_embedder()
    assert status == "WARN" and "still cached" in msg and "reembed" in fix
    assert then.model_dir.name in msg

    # Once the cache is gone, the store says searches will match poorly, as before this existed.
    shutil.rmtree(then.model_dir)
    caplog.clear()
    gone = Store(mirador_home)
    assert gone.embedder.tuning == tuning.BUNDLED and "match poorly" in caplog.text


def test_reembed_deletes_the_earlier_tuned_copy_once_no_data_dir_uses_it(tmp_path, monkeypatch):
    """~90 MB of copy and ~90 MB of export per retuning release would pile up; a copy another data dir
    still embeds with must stay, and a data dir deleted since must not keep it forever."""
    import shutil

    from memory.store import reembed as R
    from memory.store.core import EvidenceSpec, Store, write_embedder_record

    monkeypatch.setattr(tuning, "default_dir", lambda: tmp_path / "tuned")
    onnx = tmp_path / "onnx"
    onnx.mkdir()
    then = Embedder(tuning=_earlier_release(tmp_path), use_onnx=False)
    copy = then.model_dir
    assert (copy / tuning.USERS / tuning.COMPLETE).is_file()  # made by this release: its users are known
    export = onnx / f"{copy.name}-0123456789abcdef.onnx"  # named as models/onnx_encoder.py names graphs
    export.write_bytes(b"x" * 1000)
    weights = onnx / f"{export.name}.data"  # the graph's weights beside it (models/bert_onnx.py)
    weights.write_bytes(b"w" * 1000)
    stores = {}
    for name in ("work", "personal", "deleted"):
        home = tmp_path / name
        home.mkdir()
        (home / "config.toml").write_text(f"[models]\nembedder_onnx = false\nonnx_dir = '{onnx}'\n")
        write_embedder_record(home, then)
        stores[name] = Store(home)  # an upgraded store keeps the earlier copy, and notes itself as its user
        assert stores[name].embedder.model_dir == copy
        stores[name].add_evidence_batch([EvidenceSpec(text=f"{name}: the deploy failed", source="import")],
                                        actor="import")
    assert len(list((copy / tuning.USERS).iterdir())) == 4  # three data dirs and the mark
    shutil.rmtree(tmp_path / "deleted")

    first = R.reembed(stores["work"], settle=0)
    assert first["evidence"] == 1 and first["freed_bytes"] == 0
    assert copy.is_dir() and export.is_file() and weights.is_file()  # "personal" still embeds with it
    assert Store(tmp_path / "personal").embedder.model_dir == copy

    last = R.reembed(stores["personal"], settle=0)
    assert last["freed_bytes"] > 80e6  # the copy's weights, and the export
    assert not copy.exists() and not export.exists() and not weights.exists()
    now = Store(tmp_path / "work").embedder
    assert now.tuning == tuning.BUNDLED and now.model_dir.is_dir()  # the current copy stays


def test_a_copy_whose_users_are_not_all_known_is_kept(tmp_path):
    copy = tmp_path / "tuned" / "aaaaaaaaaaaa-bbbbbbbbbbbb"
    (copy / tuning.USERS).mkdir(parents=True)
    (copy / tuning.WEIGHTS).write_bytes(b"w")
    home = tmp_path / "home"
    tuning.note_user(copy, home)
    # made by a release that did not register users: some data dir never noted may still use it
    assert tuning.release(copy, home, tmp_path) == 0 and copy.is_dir()
    (copy / tuning.USERS / tuning.COMPLETE).write_text("")
    other = tmp_path / "other"
    other.mkdir()
    (other / "embedder.json").write_text("{not json")
    tuning.note_user(copy, other)
    # a user whose record cannot be read now (a disk being repaired, a half-written file) keeps it
    assert tuning.release(copy, home, tmp_path) == 0 and copy.is_dir()
    (other / "embedder.json").write_text(json.dumps({"tuned": True, "weights": "cccccccccccc-dddddddddddd"}))
    assert tuning.release(copy, home, tmp_path) == 1 and not copy.exists()


def test_a_copys_list_of_users_forgets_data_dirs_deleted_since(tmp_path):
    copy = tmp_path / "tuned" / "aaaaaaaaaaaa-bbbbbbbbbbbb"
    (copy / tuning.USERS).mkdir(parents=True)
    (copy / tuning.USERS / tuning.COMPLETE).write_text("")
    homes = [tmp_path / n for n in ("a", "b", "c")]
    for h in homes[:2]:
        h.mkdir()
        tuning.note_user(copy, h)
    homes[0].rmdir()
    homes[2].mkdir()
    tuning.note_user(copy, homes[2])  # a new user: the deleted data dir's entry goes
    listed = {f.read_text() for f in (copy / tuning.USERS).iterdir() if f.name != tuning.COMPLETE}
    assert listed == {str(homes[1].resolve()), str(homes[2].resolve())}
    assert (copy / tuning.USERS / tuning.COMPLETE).is_file()


def test_doctor_names_the_embedder_the_store_uses(mirador_home):
    from desktop.cli.doctor import check_embedder
    from memory.store.core import Store

    status, msg, _ = check_embedder()  # no store yet: the setting decides
    assert "tuned for recall" in msg
    mirador_home.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text("[models]\nembedder_tuning = false\n")
    Store(mirador_home)
    (mirador_home / "config.toml").write_text("[models]\nembedder_tuning = true\n")
    status, msg, _ = check_embedder()
    assert "tuned for recall" not in msg and "loads" in msg
