# Two commands set up everything on a fresh machine (Debian, root, no GPU):
#   make demo   install, deploy the bundled trainer with playbooks/local.toml, watch it
#   make test   install, then run every test (the rig's sshd/LXC parts included)
# `make bench` runs the benchmarks whose figures are in BENCHMARKS.md.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
DFCTL := $(VENV)/bin/dfctl

.PHONY: setup demo test bench clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(DFCTL) deploy playbooks/local.toml --name demo
	$(DFCTL) watch demo

test: setup
	@bash scripts/test.sh

bench: setup
	$(PY) -m bench

clean:
	rm -rf .dfctl-local .pytest_cache
