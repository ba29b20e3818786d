# Two commands for a fresh machine: `make run` and `make test`. Both set everything up first.
.PHONY: run test lint setup bench installer screenshots clean-venv

setup:
	@bash scripts/bootstrap.sh

run: setup
	@bash scripts/run.sh

test: setup
	@bash scripts/test.sh $(ARGS)

# The static checks alone (layer contracts, ruff, mypy); `make test` runs them first.
lint: setup
	@bash scripts/lint.sh

# The installer for this OS (Linux: dist/mirador-VERSION-linux-ARCH.tar.gz and dist/mirador_VERSION_ARCH.deb,
# sizes in dist/bundle-size.json); slow, not part of `make test`. The .deb's smoke test installs it with apt,
# runs it as a throwaway user and purges it (needs root or sudo).
installer: setup
	@bash scripts/build_installer.sh
	@bash installer/smoke_test.sh dist/mirador/mirador
	@if [ "$$(uname -s)" = Linux ]; then bash installer/linux/deb_smoke_test.sh dist/mirador_*.deb; fi

# Regenerate the README's screenshots and the tray icons in assets/ (the suite writes them to a temp dir).
screenshots: setup
	@MIRADOR_UPDATE_SCREENSHOTS=1 bash scripts/test.sh tests/desktop/test_screenshots_qt.py

bench: setup
	.venv/bin/python bench/locomo.py --data ../shared/data/locomo/locomo_dev.json

clean-venv:
	rm -rf .venv
