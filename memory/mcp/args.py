"""The types of the MCP tools' arguments: each is declared once, here, and named in the signature of the tool
function that takes it (memory/mcp/tools.py). The server builds each tool's input schema and validator from
that signature (memory/mcp/arguments.py), so what a client reads in the schema is what is checked.

Booleans and numbers are pydantic's strict types (StrictBool, StrictInt, StrictFloat): JSON true/false only,
never "yes", "true" or 1; integers only as JSON integers (not "5" or 5.0); numbers not as strings. In lax
mode "yes" was true, and evidence_forget {"confirm": "yes"} erased for real.
tests/memory/test_mcp_strict_input.py walks every tool's arguments. Every string, list and object has a
bound, so no client can send any amount (the same test checks each schema says so).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, StrictBool, StrictFloat, StrictInt

EVIDENCE_MAX_CHARS = 100_000
CONSOLIDATE_MAX_EVIDENCE = 100  # rows one consolidate call extracts: the LLM takes seconds per batch

MemType = Literal["episodic", "semantic", "procedural", "resource", "core", "vault"]
AddType = Literal["episodic", "semantic", "procedural", "resource", "core"]
Source = Literal["screen", "audio", "manual", "import", "mcp"]
RelationName = Literal["BECAUSE", "TRIGGERED", "CONTRADICTS", "UPDATES", "RESOLVES", "MENTIONS"]
ListStatus = Literal["active", "candidate", "superseded", "rejected"]


# ---- ids: each names the kind of id it takes and where to find one ----------------------------------

MemId = Annotated[str, Field(min_length=4, max_length=64, description="a memory id (mem_…) from memory_search or "
                             "memory_recall")]
GetId = Annotated[str, Field(min_length=4, max_length=64, description="a memory id (mem_…) or vault entry id (vlt_…) "
                             "from memory_search")]
EvdId = Annotated[str, Field(min_length=4, max_length=64, description="an evidence id (evd_…) from evidence_search or "
                             "timeline")]
SrcId = Annotated[str, Field(min_length=4, max_length=64, description="the memory id (mem_…) the edge starts at; it "
                             "must be in your write scope")]
DstId = Annotated[str, Field(min_length=4, max_length=64, description="the memory id (mem_…) the edge points to")]
AnyId = Annotated[str, Field(min_length=4, max_length=64, description="a memory (mem_…), evidence (evd_…) or vault "
                             "entry (vlt_…) id")]
RelId = Annotated[str, Field(min_length=4, max_length=64, description="a relation id (rel_…) from memory_related or "
                             "memory_chain")]
ForgetIds = Annotated[list[AnyId], Field(min_length=1, max_length=50, description="the ids to erase")]
UsedIds = Annotated[list[MemId], Field(min_length=1, max_length=50, description="the mem_ ids your answer used")]
EdgeEvidence = Annotated[list[EvdId] | None, Field(max_length=20, description="evd_ ids the edge rests on")]

# ---- what to search, where and when -----------------------------------------------------------------

Query = Annotated[str, Field(min_length=1, max_length=2000, description="words or a question to search for")]
SearchTypes = Annotated[list[MemType] | None, Field(max_length=6, description="only these memory types (vault: "
                                                    "secret labels); omit for all")]
# recall never hands out vault entries, so its schema does not offer them (memory_search finds them)
RecallTypes = Annotated[list[AddType] | None, Field(max_length=5, description="only these memory types; omit for all "
                                                    "but vault")]
ScopeArg = Annotated[str | None, Field(min_length=1, max_length=200, description="narrow to one scope you may read, "
                                       "e.g. work/acme; omit for all your scopes (an empty string is refused)")]
WriteScopeArg = Annotated[str | None, Field(min_length=1, max_length=200, description="the scope to store it in: your "
                                            "write scope (status shows it) or one below it, e.g. work/acme; omit for "
                                            "your write scope (an empty string is refused)")]
Since = Annotated[str | None, Field(max_length=40, description="only items at or after this ISO 8601 time, e.g. "
                                    "2024-05-08T13:56 (local if no zone); omit for no lower bound")]
Until = Annotated[str | None, Field(max_length=40, description="only items before this ISO 8601 time, e.g. "
                                    "2024-05-08T18:00 (local if no zone); omit for no upper bound")]
Names = Annotated[list[Annotated[str, Field(max_length=200)]] | None,
                  Field(max_length=20, description="only these app names, e.g. [\"kitty\", \"firefox\"]; omit for all")]
Sources = Annotated[list[Source] | None, Field(max_length=5, description="only these capture sources; omit for all")]
Limit = Annotated[StrictInt, Field(ge=1, le=50, description="at most this many results")]
Inactive = Annotated[StrictBool, Field(description="also return superseded and rejected memories")]
Budget = Annotated[StrictInt, Field(ge=50, le=8000, description="the most tokens the returned text may use")]
WithEvidence = Annotated[StrictBool, Field(description="also include captured evidence, not only memories")]
MaxChars = Annotated[StrictInt, Field(ge=100, le=100_000, description="cut the text to this many characters")]
TimelineSince = Annotated[str | None, Field(min_length=4, max_length=40, description="start, ISO 8601 (local if no "
                                            "zone), e.g. 2024-05-08T09:00; omit for 24 hours before until")]
TimelineUntil = Annotated[str | None, Field(max_length=40, description="end, ISO 8601; omit for now")]
Samples = Annotated[StrictInt, Field(ge=0, le=20, description="sample evidence ids per app")]
ListStatuses = Annotated[list[ListStatus] | None, Field(max_length=4, description="only memories with these "
                                                        "statuses; omit for active and candidate")]
PageSize = Annotated[StrictInt, Field(ge=1, le=100, description="at most this many memories per page")]
Cursor = Annotated[str | None, Field(min_length=1, max_length=500, description="next_cursor from the previous page "
                                     "(same filters); omit for the first page")]

# ---- what to write ------------------------------------------------------------------------------------

MemoryText = Annotated[str, Field(min_length=1, max_length=10_000, description="the fact, preference or procedure, "
                                  "short and self-contained")]
AddTypeArg = Annotated[AddType, Field(description="semantic (fact), procedural, episodic, resource or core")]
Title = Annotated[str | None, Field(max_length=200, description="a short title; optional")]
IdempotencyKey = Annotated[str | None, Field(min_length=1, max_length=200, description="a key you make once for "
                                             "this write (e.g. a UUID) and send again with every retry of it: a "
                                             "retry returns the first call's result and stores nothing twice; "
                                             "optional")]
Details = Annotated[dict[str, Any] | None, Field(max_length=50, description="type-specific fields, e.g. "
                                                 "{\"steps\": [...]} for procedural")]
AddStatus = Annotated[Literal["active", "candidate"], Field(description="candidate if the person has not confirmed it")]
Confidence = Annotated[StrictFloat, Field(ge=0, le=1, description="how sure you are, 0 to 1")]
NewText = Annotated[str | None, Field(max_length=10_000, description="the corrected text; omit to keep it")]
NewTitle = Annotated[str | None, Field(max_length=200, description="a new title; omit to keep it")]
NewConfidence = Annotated[StrictFloat | None, Field(ge=0, le=1, description="a new confidence, 0 to 1; omit to keep it")]
NewStatus = Annotated[Literal["active", "candidate", "rejected", "superseded"] | None,
                      Field(description="a new status; omit to keep it")]
EvidenceText = Annotated[str, Field(min_length=1, max_length=EVIDENCE_MAX_CHARS, description="the raw text to keep as "
                                    "evidence: a note, a transcript, a page's text; secrets in it are redacted")]
EvidenceApp = Annotated[str | None, Field(max_length=200, description="the app or source it came from, e.g. slack; "
                                          "omit for this client's name")]
Window = Annotated[str | None, Field(max_length=500, description="a window, page or channel title; optional")]
CapturedAt = Annotated[str | None, Field(max_length=40, description="when it was seen or said, ISO 8601 (local if no "
                                         "zone); omit for now")]

# ---- erasing and consolidating ----------------------------------------------------------------------------

ForgetApp = Annotated[str | None, Field(min_length=1, max_length=200, description="erase evidence captured from this "
                                        "app (as timeline names it); omit for every app")]
Confirm = Annotated[StrictBool, Field(description="false (default): only return what would be erased, with counts; "
                                      "true: erase it")]
DryRun = Annotated[StrictBool, Field(description="true: only return the plan (any token); false: run it (needs a "
                                     "write scope)")]
ConsolidateLimit = Annotated[StrictInt, Field(ge=1, le=CONSOLIDATE_MAX_EVIDENCE, description="at most this many "
                                              "pending evidence rows to extract in this call")]
ConsolidateScope = Annotated[str | None, Field(min_length=1, max_length=200, description="dry run: narrow the plan to "
                                               "one scope you may read; run: your write scope or one below it; omit "
                                               "for all your scopes (dry run) or your write scope (run)")]

# ---- relations --------------------------------------------------------------------------------------------

Relation = Annotated[RelationName, Field(description="how src relates to dst: src RELATION dst")]
Relations = Annotated[list[RelationName] | None, Field(max_length=6, description="only these relation types; omit for "
                                                       "all")]
Direction = Annotated[Literal["out", "in", "both"], Field(description="out: edges from this memory; in: edges to it")]
EdgeLimit = Annotated[StrictInt, Field(ge=1, le=100, description="at most this many edges")]
ChainDirection = Annotated[Literal["causes", "consequences"], Field(description="causes: why; consequences: what "
                                                                   "followed")]
Depth = Annotated[StrictInt, Field(ge=1, le=6, description="how many hops to follow")]
