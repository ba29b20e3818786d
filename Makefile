# Two commands for a fresh machine: `make run` and `make test`. Both set everything up first.
.PHONY: run test setup bench clean-venv

setup:
	@bash scripts/bootstrap.sh

run: setup
	@bash scripts/run.sh

test: setup
	@bash scripts/test.sh $(ARGS)

bench: setup
	.venv/bin/python bench/locomo.py --data ../shared/data/locomo/locomo_dev.json

clean-venv:
	rm -rf .venv
