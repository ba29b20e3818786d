# Two commands for a fresh machine: `make run` and `make test`. Both set everything up first.
.PHONY: run test setup bench installer clean-venv

setup:
	@bash scripts/bootstrap.sh

run: setup
	@bash scripts/run.sh

test: setup
	@bash scripts/test.sh $(ARGS)

# The installer for this OS (Linux: dist/mirador-VERSION-linux-ARCH.tar.gz); slow, not part of `make test`.
installer: setup
	@bash scripts/build_installer.sh
	@bash installer/smoke_test.sh dist/mirador/mirador

bench: setup
	.venv/bin/python bench/locomo.py --data ../shared/data/locomo/locomo_dev.json

clean-venv:
	rm -rf .venv
