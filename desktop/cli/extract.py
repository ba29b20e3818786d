"""`mirador extract` and `mirador dream`: run extraction and consolidation by hand."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.cli.common import open_store
from desktop.cli.output import emit_json, short
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.consolidation.dream import DreamPlan


def cmd_extract(a: argparse.Namespace) -> int:
    """Extract memories from pending evidence (or all evidence with --all) and report what happened."""
    from memory.consolidation.extraction import make_extractor, run_extraction

    store = open_store()
    extractor = make_extractor(store, engine="rules" if a.rules else None)
    try:
        report = run_extraction(store, all_evidence=a.all, extractor=extractor, limit=a.limit)
    finally:
        extractor.close()  # one-shot command: stop the model's worker process
    if a.json:
        emit_json(report.to_dict())
        return 0
    engines = ", ".join(f"{n} {k}" for k, n in sorted(report.engines.items())) or "none"
    print(f"{report.evidence} evidence rows in {report.batches} batches ({engines}; model {report.model or '-'})")
    print(f"  active created  {report.created}\n  candidates      {report.candidates}\n"
          f"  corroborated    {report.corroborated}\n  superseded      {report.superseded}\n"
          f"  skipped         {report.skipped}")
    for reason, n in sorted(report.skip_reasons.items()):
        print(f"    {n:>4}  {reason}")
    if report.noise_rows:
        print(f"  read as noise   {report.noise_rows} evidence rows (no memory from them; the evidence is kept)")
    if report.llm_failures:
        print(f"  LLM failures    {report.llm_failures} of {report.llm_calls} calls (rules used instead)")
    print(f"  took {report.seconds:.1f}s")
    return 0


def _print_plan(plan: DreamPlan) -> None:
    mode = "dry run — nothing written" if plan.dry_run else f"{plan.applied} applied, {plan.proposed} proposed"
    print(f"dream pass since {plan.since or 'the beginning'}: {plan.changed} changed memories; {mode}")
    if not plan.steps:
        print("  nothing to do")
    for s in plan.steps:
        what = f"{len(s.ids)} memories" if s.kind == "decay" else (s.target_id or "")
        extra = f" → {s.other_id}" if s.other_id else ""
        text = f"  \"{short(s.spec['text'], 60)}\"" if s.spec else ""
        print(f"  {s.action:<7} {s.kind:<11} {what}{extra}  ({s.reason}){text}")


def cmd_dream(a: argparse.Namespace) -> int:
    """Run a dream pass (or --dry-run to only print the plan); --proposals / --accept / --dismiss review them."""
    from memory.consolidation.dream import decide_proposal, list_proposals, run_dream

    store = open_store()
    if a.accept or a.dismiss:
        if a.accept and a.dismiss:
            raise InputError("give --accept or --dismiss, not both")
        row = decide_proposal(store, a.accept or a.dismiss, accept=bool(a.accept), actor="person")
        emit_json(row) if a.json else print(f"{row['id']} {row['status']}")
        return 0
    if a.proposals:
        rows = list_proposals(store, scopes=a.scope)
        if a.json:
            emit_json(rows)
        else:
            for r in rows:
                other = f" → {r['other_id']}" if r["other_id"] else ""
                print(f"{r['id']}  {r['kind']:<9} {r['target_id']}{other}  ({r['reason']})")
            print(f"{len(rows)} open proposals" if rows else "no open proposals")
        return 0
    plan = run_dream(store, dry_run=a.dry_run)
    emit_json(plan.to_dict()) if a.json else _print_plan(plan)
    return 0


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `extract` and `dream` to the mirador parser."""
    sp = cmd("extract", cmd_extract, "turn new evidence into memories now (--all: all evidence, e.g. after a model change)")
    sp.add_argument("--all", action="store_true", help="re-run over every evidence row, not only new ones")
    sp.add_argument("--rules", action="store_true", help="use the rule-based extractor only (no LLM)")
    sp.add_argument("--limit", type=int, help="at most this many new evidence rows")
    as_json(sp)

    sp = cmd("dream", cmd_dream, "consolidate memories now: merge, supersede, decay, crystallise (see --dry-run)")
    sp.add_argument("--dry-run", action="store_true", help="print the plan and write nothing")
    sp.add_argument("--proposals", action="store_true", help="list open proposals instead of running a pass")
    sp.add_argument("--accept", metavar="ID", help="accept a proposal (hides its target memory)")
    sp.add_argument("--dismiss", metavar="ID", help="dismiss a proposal")
    scope(sp)
    as_json(sp)
