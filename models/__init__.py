"""Local model runtimes behind small interfaces. Nothing here imports the rest of Mirador."""

import os

# OpenMP pools (torch, CTranslate2, llama.cpp) spin-wait between parallel regions by default, which on
# a shared 2-core machine burns the core another process needs. Passive waiting measured no slower
# idle (torch batches 176 vs 176 rows/s; whisper RTF 0.040 vs 0.040; Gemma prompt+32 tokens within
# noise) and faster with the other core busy (torch 2 threads 90 vs 71 rows/s; whisper RTF 0.047 vs
# 0.052). Set before any of them loads libgomp, which reads it once; a value the person set stays.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
