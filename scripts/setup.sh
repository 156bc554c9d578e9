#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine (root, no GPU) or a developer's box:
# system packages the test rig needs, then a virtual environment at .venv with dfctl,
# the trainer's torch and the test tools. Re-running it does only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
command -v lxc-create >/dev/null 2>&1 || need_apt+=(lxc)
[ -x /bin/busybox ] || [ -x /usr/bin/busybox ] || need_apt+=(busybox-static)
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v ip >/dev/null 2>&1 || need_apt+=(iproute2)
command -v rsync >/dev/null 2>&1 || need_apt+=(rsync)
if [ "${#need_apt[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing system packages: ${need_apt[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
stamp=.venv/.dfctl-installed
install_main() {
  echo "setup: installing dfctl and its dependencies into .venv (log: .venv/setup.log)" >&2
  {
    "$VPY" -m pip install -q --upgrade pip &&
    # torch first, pinned to the CPU build that lies on this kind of machine's disk; a GPU box
    # can set DFCTL_TORCH_SPEC (e.g. "torch") to take its own.
    { "$VPY" -c 'import torch' 2>/dev/null || "$VPY" -m pip install -q "${DFCTL_TORCH_SPEC:-torch==2.13.0}"; } &&
    "$VPY" -m pip install -q -e '.[trainer,dev]'
  } >.venv/setup.log 2>&1 || { cat .venv/setup.log >&2; echo "setup: pip install failed (above)" >&2; return 1; }
  touch "$stamp"
}
# The real DFlash clients for tests/trainer/test_export.py, in their own venv: vLLM
# speculators 0.9.0 needs transformers 5 and would pull torch 2.14 + torchvision/torchaudio
# into .venv. It imports without torchvision/torchaudio, so: the same CPU torch, then
# speculators without its pins, then the packages it imports. SpecForge's wheel (pins torch
# 2.11 and sglang) goes in without its dependencies too: its DFlash module needs only
# torch and transformers. z-lab's `dflash` 0.1.0 (the reference inference loop the decode
# evaluation is held to) likewise: its model module needs only torch and transformers.
cstamp=.venv-clients/.dfctl-installed
install_clients() {
  echo "setup: installing the DFlash clients into .venv-clients (log: .venv-clients/setup.log)" >&2
  [ -x .venv-clients/bin/python ] || "$PY" -m venv .venv-clients
  {
    .venv-clients/bin/python -m pip install -q "${DFCTL_TORCH_SPEC:-torch==2.13.0}" &&
    .venv-clients/bin/python -m pip install -q --no-deps speculators==0.9.0 specforge==0.2.0 dflash==0.1.0 &&
    .venv-clients/bin/python -m pip install -q 'transformers==5.19.0' 'datasets<=5.1.0' 'loguru<=0.7.3' \
      pydantic pydantic-settings rich typer click httpx huggingface-hub protobuf psutil safetensors \
      'tqdm<=4.70.1' numpy aiohttp 'openai>=2' hs-connectors==0.9.0
  } >.venv-clients/setup.log 2>&1 || { cat .venv-clients/setup.log >&2; echo "setup: clients install failed (above)" >&2; return 1; }
  touch "$cstamp"
}
# The two venvs share nothing but pip's cache (safe for concurrent use), and each install is
# mostly waiting on downloads and unpacking: side by side they take about as long as the
# larger one alone (a fresh CI clone's set-up was ~3.5 min one after the other).
pids=()
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then install_main & pids+=($!); fi
if [ ! -f "$cstamp" ] || ! .venv-clients/bin/python -c "import dflash.model" 2>/dev/null; then install_clients & pids+=($!); fi
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[ "$failed" = 0 ] || exit 1
echo "setup: ready (.venv)" >&2
