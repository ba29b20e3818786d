"""A varied text sample for measuring offline token counts against real BPE tokenizers.

Covers what Mirador stores and renders: prose, chat turns, OCR'd screen text, code, JSON, logs,
URLs and paths, numbers and dates, accented European text, CJK, emoji, and recall blocks.
"""

from __future__ import annotations

SAMPLES: list[str] = [
    # prose and decisions
    "We picked PostgreSQL over MySQL because we need transactional DDL and proper JSONB indexing.",
    "Sam said the release date moves to March 14th; marketing needs the final build by the 10th.",
    "Decision: keep the monolith for now, split the billing service out once the team grows past eight.",
    "The quick brown fox jumps over the lazy dog while the cat watches from the windowsill.",
    "Caroline went to the LGBTQ support group yesterday and said it was really powerful for her.",
    "Melanie painted a sunrise over the lake last year and plans to run a charity race next month.",
    "I can't believe it's already November! Didn't we just start the Q3 planning, like, yesterday?",
    "Remember to renew the passport before the trip to Lisbon; the appointment is at 09:30 on Tuesday.",
    # chat transcript
    "Sam: are we still on for the 3pm sync?\nAlex: yes, but I'll be 5 min late\nSam: np, I'll share the deck",
    "[10:42] speaker_1: so the latency regression came from the new logging middleware\n"
    "[10:43] speaker_2: right, we serialise the whole request body now",
    # OCR'd screen text (noisy)
    "File Edit View Go Run Terminal Help   main.py - mirador - Visual Studio Code   PROBLEMS 3  OUTPUT",
    "Inbox (1,284)  Compose  Starred  Snoozed  Sent  Drafts (12)  Re: Q4 budget — final numbers attached",
    "l0ading... pl3ase wa1t || ERR_C0NNECTION_RES3T  chrome://net-internals/#sockets  ▸ Reload",
    # code
    "def search(store, query, *, limit=10):\n    hits = store.search(query).limit(limit).to_list()\n"
    "    return [h for h in hits if h['_distance'] < 0.8]\n",
    "for (let i = 0; i < items.length; i++) {\n  if (items[i].id === target) { return items[i]; }\n}",
    "SELECT id, text FROM memories WHERE scope = 'work' AND status IN ('active', 'candidate') ORDER BY updated_at DESC;",
    "    class Store:\n        def __init__(self, home=None):\n            self.home = Path(home)\n\n"
    "        def optimize(self) -> None:\n            pass\n",
    "fn main() -> Result<(), Box<dyn Error>> { let v: Vec<u64> = (0..10).map(|x| x * x).collect(); Ok(()) }",
    # JSON, logs, config
    '{"id": "mem_3f9a1c2b7d8e4f60a1b2c3d4", "type": "semantic", "scope": "work/acme", "confidence": 0.87}',
    '[{"role": "user", "content": "why did we pick PostgreSQL?"}, {"role": "assistant", "content": "see mem_1"}]',
    "2026-11-30T04:10:47.123Z INFO  memory.store.core commit conflict, retrying (attempt 2/6) table=evidence rows=128",
    "WARN  [scheduler] job 'dream' missed its run time by 0:00:42.117; next run at 2026-12-01 03:00:00+00:00",
    "[store]\ndefault_scope = \"work\"\noptimize_after_writes = 50\n\n[recall]\nhalf_life_days = { episodic = 14 }",
    # URLs, paths, ids, numbers
    "https://github.com/lancedb/lancedb/issues/1234#issuecomment-567890 and /home/sam/.local/share/mirador/lancedb",
    "evd_9c1e2f3a4b5c6d7e8f901234 mem_0a1b2c3d4e5f60718293a4b5 vlt_ffeeddccbbaa998877665544",
    "Invoice #INV-2024-00917: 3 × 49.99 EUR = 149.97 EUR, VAT 19% = 28.49 EUR, total 178.46 EUR.",
    "Phone +49 30 1234567, IBAN DE89 3704 0044 0532 0130 00, ticket JIRA-4821, build 1.14.3-rc2.",
    "3.14159265358979 2.71828182845905 1.41421356237310 6.02214076e23 1.602176634e-19",
    # European languages
    "Die Entscheidung für PostgreSQL fiel wegen der Transaktionssicherheit und der guten Unterstützung für JSON.",
    "Nous avons choisi la base de données la plus fiable ; la réunion est déplacée à jeudi prochain à 14 h.",
    "La reunión de mañana se cancela; el informe trimestral estará listo el viernes por la tarde.",
    "Přístup k databázi je omezený; žádost o oprávnění podejte přes helpdesk do středy.",
    # CJK, other scripts, emoji
    "我们选择了PostgreSQL，因为它支持事务和JSON索引。会议改到星期四下午两点。",
    "明日の会議は午後3時に変更されました。資料は共有フォルダにあります。",
    "회의는 목요일 오후 2시로 변경되었습니다. 자료는 공유 폴더에 있습니다.",
    "Встреча перенесена на четверг; отчёт будет готов в пятницу вечером.",
    "Great job team 🎉🚀 the release shipped! 👍 see you at the party 🍕🍺",
    "✅ done  ❌ failed  ⚠️ flaky  →  ←  ≥ ≤ ≠ ∑ ∫ √ ∞ … “quoted” ‘single’ — – •",
    # recall-block shaped text
    "[mem_3f9a1c2b7d8e4f60a1b2c3d4] decision 2026-11-02T10:00:00Z from evd_1a2b3c4d5e6f708192a3b4c5\n"
    "We picked PostgreSQL over MySQL because we need transactional DDL.",
    "[evd_9c1e2f3a4b5c6d7e8f901234] screen 2026-11-29T16:20:11Z Slack · #release\n"
    "Sam: the release date moves to March 14th",
    # whitespace-heavy
    "col_a      col_b      col_c\n1          2          3\n4          5          6\n\n\n\n",
    "\t\tindented\twith\ttabs\n\t\t\tand more tabs\n",
]


def long_samples() -> list[str]:
    """Block-sized texts (the size recall renders) made by joining the short samples."""
    out = []
    for i in range(0, len(SAMPLES), 6):
        out.append("\n".join(SAMPLES[i: i + 6]))
    out.append("\n".join(SAMPLES))
    return out
