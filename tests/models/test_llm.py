"""The LLM runtime: bundled Gemma, schema-constrained JSON, the per-call timeout, crash isolation."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.llm import LLM, LLMError, detect_instruct
from models.locate import ModelNotFound

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 30}, "country": {"enum": ["France", "Italy", "Spain"]}},
    "required": ["city", "country"],
}
PROMPT = ("Q: Where is the Colosseum?\nA: {\"city\": \"Rome\", \"country\": \"Italy\"}\n"
          "Q: Where is the Eiffel Tower?\nA:")


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    llm = LLM(cache_dir=tmp_path_factory.mktemp("models"), timeout=240)
    yield llm
    llm.close()


@pytest.mark.timeout(300)
def test_bundled_gemma_answers_schema_valid_json(gemma):
    out = gemma.complete_json(PROMPT, SCHEMA, max_tokens=24)
    assert isinstance(out.data, dict) and set(out.data) == {"city", "country"}
    assert out.data["country"] in ("France", "Italy", "Spain") and len(out.data["city"]) <= 30
    assert not out.timed_out and out.completion_tokens > 0
    info = gemma.info
    assert info is not None and not info.instruct and "gemma" in info.name.lower()
    assert Path(info.path).name == "gemma-3-270m-q4_k_m.gguf"


@pytest.mark.timeout(300)
def test_timeout_cuts_a_call_short_instead_of_hanging(gemma):
    gemma.load()
    saved = gemma.timeout
    gemma.timeout = 0.001  # checked after every token by a stopping criterion
    try:
        out = gemma.complete_json(PROMPT, SCHEMA, max_tokens=24)
    finally:
        gemma.timeout = saved
    assert out.timed_out and out.data is None and out.completion_tokens <= 2


@pytest.mark.timeout(300)
def test_a_worker_crash_fails_one_call_then_restarts(gemma):
    gemma.load()
    conn, proc = gemma._conn, gemma._proc
    real_send = conn.send

    def send_then_die(req):  # what a native abort inside llama.cpp mid-call looks like from the app
        real_send(req)
        proc.kill()

    conn.send = send_then_die
    with pytest.raises(LLMError, match="crashed"):
        gemma.complete_json(PROMPT, SCHEMA, max_tokens=8)
    out = gemma.complete_json(PROMPT, SCHEMA, max_tokens=24)  # a fresh worker answers the next call
    assert out.data is not None and gemma._proc is not proc


def test_instruct_detection_from_gguf_metadata():
    tpl = {"tokenizer.chat_template": "{{ messages }}"}
    assert detect_instruct({"general.name": "gemma-3-270m-it", **tpl})
    assert detect_instruct({"general.name": "Qwen2.5 1.5B Instruct", **tpl})
    assert not detect_instruct({"general.name": "Gemma 3 270m"})
    assert not detect_instruct({"general.name": "Gemma 3 270m", **tpl})  # a template alone is not enough
    assert not detect_instruct({"general.name": "gemma-3-270m-it"})  # nothing to wrap prompts with


def test_missing_configured_model_says_how_to_fix(tmp_path):
    llm = LLM(tmp_path / "nope.gguf")
    with pytest.raises(ModelNotFound, match="models.llm_path"):
        llm.load()


def test_needs_a_model_or_a_cache_dir():
    with pytest.raises(LLMError, match="cache_dir"):
        LLM()
