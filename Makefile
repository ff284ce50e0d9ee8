# ember: a newcomer needs two targets, `make train` and `make test`.
CARGO ?= cargo
EMBER := target/release/ember
# Recorded in every run's summary.json. Set for every cargo command alike, so that the build of
# `make train` and the one of `make test` stay the same build.
export EMBER_GIT_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null)

.PHONY: data build train test docs lint bench bench-ops bench-peers bench-tables gpu-pack gpu-check clean

data:        ## FashionMNIST in datasets/fashion-mnist or Debian's /usr/share/datasets/fashion-mnist
	scripts/get-data.sh

build:       ## the release binary, with the CUDA backend (chosen at run time)
	$(CARGO) build --release

train: data build   ## fashion-mlp on the best device present
	$(EMBER) train configs/fashion-mlp.toml

test: data   ## every test of both crates, in the release profile (one build of Burn serves both)
	$(CARGO) test --release --workspace

docs:        ## rewrites docs/commands.md from the binary's --help (tests/docs.rs checks it)
	EMBER_BLESS_DOCS=1 $(CARGO) test --release --test docs the_command_reference

lint:        ## formatting and clippy
	$(CARGO) fmt --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

bench: data build   ## `ember bench` of each job on the best device: Learner vs bare loop
	for job in fashion-mlp tabular-mlp linear-scalar; do $(EMBER) bench configs/$$job.toml || exit 1; done

bench-ops:   ## this machine's fp32 peak (crates/ember-kernels/benches/peak.rs), then the CPU kernels (benches/ops.rs)
	$(CARGO) bench -p ember-kernels --bench peak
	$(CARGO) bench --bench ops

bench-peers: data build   ## ember against PyTorch, Keras and JAX side by side -> docs/benchmarks/
	scripts/bench-peers.sh

# The tables' Python environment (pandas, scikit-learn, lightgbm), made on first use;
# TABLES_ARGS="--only NAME ..." runs some tables only.
TABLES_VENV ?= .tables-venv

bench-tables: build   ## ember's drafted defaults against LightGBM and scikit-learn on public tables
	test -x $(TABLES_VENV)/bin/python || python3 -m venv $(TABLES_VENV)
	$(TABLES_VENV)/bin/pip install --quiet -r bench/tables/requirements.txt
	$(TABLES_VENV)/bin/python bench/tables/bench.py --ember $(EMBER) --work bench-out/tables $(TABLES_ARGS)

gpu-pack:    ## what scripts/gpu-check.sh needs on a GPU machine (binary + data, < 64 MiB)
	scripts/gpu-check.sh --pack

gpu-check:   ## the CUDA checks and benchmarks (on a GPU machine; --dry-run elsewhere)
	scripts/gpu-check.sh

clean:
	rm -rf runs bench-out gpu-out gpu-bundle
