# Thin wrappers around scripts/*.sh (each creates or reuses .venv).
.PHONY: demo test docs bootstrap bench-quick

demo:
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)

docs:
	bash scripts/docs.sh

bootstrap:
	bash scripts/bootstrap.sh

bench-quick: bootstrap
	.venv/bin/python benchmarks/pair_view_scaling.py --quick --out results/pair_view_scaling_quick.json
