# Thin wrappers around scripts/*.sh (each creates or reuses .venv).
.PHONY: demo test bootstrap bench-quick

demo:
	bash scripts/demo.sh $(ARGS)

test:
	bash scripts/test.sh $(ARGS)

bootstrap:
	bash scripts/bootstrap.sh

bench-quick: bootstrap
	.venv/bin/python benchmarks/pair_view_scaling.py --quick --out results/pair_view_scaling_quick.json
