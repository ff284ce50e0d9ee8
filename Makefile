# ember: a newcomer needs two targets, `make train` and `make test`.
CARGO ?= cargo
EMBER := target/release/ember

.PHONY: data build train test lint bench bench-peers clean

data:        ## FashionMNIST in datasets/fashion-mnist or Debian's /usr/share/datasets/fashion-mnist
	scripts/get-data.sh

build:       ## the release binary, with the CUDA backend (chosen at run time)
	$(CARGO) build --release

train: data build   ## fashion-mlp on the best device present
	$(EMBER) train configs/fashion-mlp.toml

test: data   ## every test, in the release profile (one build of Burn serves both)
	$(CARGO) test --release

lint:        ## formatting and clippy
	$(CARGO) fmt --check
	$(CARGO) clippy --release --all-targets -- -D warnings

clean:
	rm -rf runs bench-out
