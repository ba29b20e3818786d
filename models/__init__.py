"""Local model runtimes behind small interfaces. Nothing here imports the rest of Mirador."""

import os

# OpenMP pools (torch, CTranslate2, llama.cpp) spin-wait between parallel regions by default, which on
# a shared 2-core machine burns the core another process needs. Passive waiting measured no slower
# idle and faster with the other core busy, for torch, whisper and the LLM alike.
# Set before any of them loads libgomp, which reads it once; a value the person set stays.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
