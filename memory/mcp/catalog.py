"""The tools the MCP server offers: for each, what a model reads about it (its description and hints), its
result model (memory/mcp/results.py: the body's return annotation, which must name the same model; the output
schema clients get), and its arguments, read from the signature of the function of the same name in
memory/mcp/tools.py (memory/mcp/arguments.py).

Listed in the order clients see them. The tool body is looked up in memory/mcp/tools.py on every call, by
name, not kept here: a test may stand in a body of its own.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

from mcp.types import Tool as ToolInfo
from mcp.types import ToolAnnotations
from pydantic import BaseModel

from memory.mcp import results as R
from memory.mcp import tools as T
from memory.mcp.arguments import Arguments

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
ERASE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the server offers it."""

    name: str
    hints: ToolAnnotations
    result: type[BaseModel]
    description: str
    arguments: Arguments
    # False: not queued behind the searches (memory/mcp/server.py TOOL_THREADS): tools that answer from kept
    # counts or one row by id, and consolidate, which may run a local LLM for minutes.
    queued: bool
    info: ToolInfo  # the tool as tools/list shows it, made once


def returns(fn: Callable[..., object]) -> object:
    """What fn's return annotation names: a string under `from __future__ import annotations`, a model's bare
    name, looked up where fn is defined (not evaluated: its other annotations name types only mypy imports)."""
    annotation = inspect.signature(fn).return_annotation
    return fn.__globals__.get(annotation) if isinstance(annotation, str) else annotation


def _tool(name: str, hints: ToolAnnotations, result: type[BaseModel], description: str,
          queued: bool = True) -> ToolSpec:
    body = getattr(T, name)
    if returns(body) is not result:  # the schema clients get is the model the body builds
        raise TypeError(f"memory/mcp/tools.py {name} returns {returns(body)!r}, not its result model {result.__name__}")
    arguments, text = Arguments.of(body), inspect.cleandoc(description)
    info = ToolInfo(name=name, description=text, input_schema=arguments.schema,
                    output_schema=result.model_json_schema(), annotations=hints)
    return ToolSpec(name, hints, result, text, arguments, queued, info)


TOOLS: dict[str, ToolSpec] = {t.name: t for t in (
    _tool("memory_search", READ, R.MemorySearch, """
        Search the person's memories (facts, preferences, procedures, events, resources) by meaning and words.

        Use it to answer "what do I know about X" or to find an id before memory_get, memory_update or
        memory_forget. Filter by types, a scope, or a time range (since/until, ISO) on last change.
        include_inactive also returns superseded and rejected memories.
        """),
    _tool("memory_recall", READ, R.Recall, """
        Get ready-to-use context for a task: the most relevant memories (and evidence) within a token budget.

        Call this first when starting a task or answering a question about the person, their projects or
        preferences. Returns one text block to read plus the items (with ids) it was built from.
        """),
    _tool("memory_get", READ, R.MemoryRecord, """
        Read every field of one memory (mem_…) or vault entry (vlt_…): details, status, provenance evidence ids.

        Use after memory_search/memory_recall when you need the full record or its evidence ids.
        """, queued=False),
    _tool("memory_add", WRITE, R.MemoryAdded, """
        Remember something durable the person told you or that you learned: one fact, preference or procedure.

        Use when the person says "remember…", states a preference, or you learn a stable fact about their
        work. Keep text short and self-contained. Types: semantic (fact), procedural (how to do something;
        details.steps), episodic (an event), resource (a document/link; details.uri), core (profile).
        Search first to avoid duplicates; to change an existing memory use memory_update.
        """),
    _tool("memory_update", WRITE, R.MemoryUpdated, """
        Correct or confirm an existing memory: new text/title/details/confidence, or a status change.

        Use when a memory is outdated or wrong (status=rejected or superseded), or to confirm a candidate
        (status=active). Memories pinned by the person cannot be changed.
        """),
    _tool("memory_forget", ERASE, R.Forgotten, """
        Erase memories or evidence for good (no undo). Only when the person explicitly asks to forget them.

        Every id is checked first; if one is unknown or outside your write scope nothing is deleted.
        """),
    _tool("evidence_forget", ERASE, R.EvidenceForget, """
        Erase captured evidence by app and/or time range, for good (no undo), with the memories derived only
        from it. Only when the person explicitly asks, e.g. "delete everything from Slack" or "the last hour".

        Give app, since or until (or several). First call without confirm: it returns what would be erased,
        with counts, and changes nothing; tell the person, then call again with confirm=true. Memories that
        also rest on other evidence, or that the person edited, lose these sources and go to review; memories
        the person wrote and vault entries are never touched. Works in your write scope (or one below it);
        if the delete would change a memory outside it, nothing is erased.
        """),
    _tool("memory_reinforce", WRITE, R.Reinforced, """
        Tell Mirador which memories your answer actually used (mem_ ids from memory_recall/memory_search).

        Call it once after answering, with only the memories you relied on — not everything you were shown.
        Used memories rank higher later; unused ones slowly fade back. It needs a token with a write scope;
        ids outside that scope, unknown or forgotten ones are listed under not_found and nothing is recorded.
        """),
    _tool("evidence_search", READ, R.EvidenceSearch, """
        Search raw captured evidence: screen text (OCR), meeting transcripts, notes — exact words and meaning.

        Use when memories do not have the answer, to find where something was seen ("the error I saw in the
        terminal"), or to check a memory's source. Filter by app name, source, scope or time range.
        """),
    _tool("evidence_get", READ, R.EvidenceRow, """
        Read one captured evidence row (evd_…) in full: text, app, window, time, source.
        """, queued=False),
    _tool("timeline", READ, R.Timeline, """
        What happened between two times (ISO; since defaults to 24 hours before until, until to now).

        Captured activity grouped by app.

        Use for "what was I doing this morning", "summarise yesterday afternoon". Returns per app the count,
        first/last time, main windows and sample evidence ids, plus episodic memories from that span.
        """),
    _tool("status", READ, R.Status, """
        Who you are to Mirador (client name, readable scopes, write scope) and how much memory you can see.

        Call it when a tool says you lack access, or to check that capture is running (last_evidence_at).
        """, queued=False),
    _tool("memory_related", READ, R.Related, """
        List a memory's neighbours by relation: why it holds (BECAUSE), what it triggered, fixed or replaced.

        Edges read "src RELATION dst" (a decision BECAUSE its reason; an alert TRIGGERED a rollback; a fix
        RESOLVES a problem; a new value UPDATES an old one; CONTRADICTS; MENTIONS). direction out: this memory
        is src; in: it is dst. include_inactive also returns superseded and rejected neighbours.
        """),
    _tool("memory_chain", READ, R.Chain, """
        Follow a memory's causes ("why was this decided?") or consequences ("what followed?") up to depth hops.

        Follows BECAUSE, TRIGGERED and RESOLVES unless relations says otherwise; each memory appears once,
        so cycles end. Every hop carries its edge and the evidence rows it rests on.
        """),
    _tool("memory_relate", WRITE, R.EdgeAdded, """
        Record how two memories relate, as "src RELATION dst" (e.g. a decision BECAUSE its reason).

        src must be in your write scope and dst readable by you. Adding the same edge again only merges its
        evidence. Use it when the person explains why something was decided or what fixed what.
        """),
    _tool("evidence_add", WRITE, R.EvidenceAdded, """
        Keep raw text as evidence (source "mcp"), like captured screen text: searchable at once, and turned
        into memories by extraction later.

        Use for material the person shares that is not one distilled fact (a meeting's notes, a pasted thread);
        for a single durable fact use memory_add. Secrets (keys, tokens, passwords, card numbers) are replaced
        by [REDACTED:kind] before anything is stored. Needs a token with a write scope; stored in that scope
        or the one you name below it.
        """),
    _tool("memory_list", READ, R.MemoryPage, """
        List the person's memories page by page, most recently changed first: browse without a query.

        Filter by scope, types and status; pass next_cursor back as cursor for the next page (null: no more).
        Use memory_search to find memories about something; this tool is for going through all of them.
        """),
    _tool("relation_remove", ERASE, R.RelationRemoved, """
        Remove one relation between two memories (rel_… id), e.g. a BECAUSE that turned out wrong.

        The memories stay. Needs a token whose write scope holds the relation's src memory. To record a
        corrected link afterwards call memory_relate.
        """),
    _tool("consolidate", WRITE, R.Consolidation, """
        Consolidate memory now: extract memories from pending evidence, then a dream pass (merge duplicates,
        supersede stale facts, crystallise repeated patterns).

        dry_run=true (the default) changes nothing and shows the plan for your scopes: pending evidence and
        the dream steps; any token may ask. dry_run=false needs a token with a write scope and works inside
        it only: it extracts up to limit pending evidence rows (call again while pending_evidence > 0) and
        applies the dream steps there. Merges and superseded facts become proposals the person reviews;
        salience decay stays with Mirador's scheduled pass.
        """, queued=False),
)}
