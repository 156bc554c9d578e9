"""Make the corpus: run real libraries and launchers on CPU, keep what they printed.

    .venv/bin/python tests/corpus/generate.py [--only NAME ...] [--jobs 2]

Each scenario below is one real run (a program from programs/ under a real launcher:
python, bash, torchrun, accelerate, deepspeed, ipython, Lightning, transformers' Trainer,
wandb offline); its stdout+stderr together, as a terminal or a `>log 2>&1` would hold
them, go to logs/<name>.log, and its label to index.json: the finding kinds a reader of
that log must report (`expect`; empty = a healthy run, no failure kind allowed), words
a finding's summary must contain (`must`), and the command that made it. The checkout's
path is replaced by /src so a log does not depend on where it was made; nothing else is
edited.

Held out: a scenario whose name's SHA-1 ends in a hex digit below 4 (a quarter) is marked
`heldout` -- that set was fixed when the corpus was first generated, before the rules of
controller/judge/ were rewritten, and is only measured (bench/detectors.py), never
looked at while writing rules.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"
LOGS = HERE / "logs"
INDEX = HERE / "index.json"
VENV_BIN = Path(sys.executable).parent


@dataclass
class Scenario:
    name: str
    framework: str
    command: str                    # a bash command line; {py}, {bin}, {prog} are filled in
    expect: list[str] = field(default_factory=list)
    must: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = 240

    @property
    def heldout(self) -> bool:
        return hashlib.sha1(self.name.encode()).hexdigest()[-1] in "0123"


S = Scenario
P = "{py} {prog}/plain.py"
SCENARIOS: list[Scenario] = []

# -- plain PyTorch scripts ---------------------------------------------------------------
for fmt in ("kv", "dict", "pipe", "bracket", "mainloss"):
    SCENARIOS += [
        S(f"plain-healthy-{fmt}", "torch", f"{P} healthy --fmt {fmt}"),
        S(f"plain-tempting-{fmt}", "torch", f"{P} tempting --fmt {fmt}"),
        S(f"plain-handled-{fmt}", "torch", f"{P} handled --fmt {fmt}"),
        S(f"plain-nan-{fmt}", "torch", f"{P} nan --fmt {fmt}", ["nan"]),
        S(f"plain-infgrad-{fmt}", "torch", f"{P} inf-grad --fmt {fmt}", ["nan"]),
    ]
SCENARIOS += [
    S("plain-backward-twice", "torch", f"{P} backward-twice", ["crash"], ["RuntimeError", "backward through the graph"]),
    S("plain-shape", "torch", f"{P} shape", ["crash"], ["RuntimeError"]),
    S("plain-index", "torch", f"{P} index", ["crash"], ["IndexError"]),
    S("plain-keyerror", "torch", f"{P} keyerror --fmt dict", ["crash"], ["KeyError"]),
    S("plain-chained", "torch", f"{P} chained", ["crash"], ["RuntimeError", "data shard"]),
    S("plain-thread", "torch", f"{P} thread", ["crash"], ["ValueError", "prefetch-0"]),
    S("amp-scaler-healthy", "torch.amp", f"{P} scaler-healthy --steps 120"),
    S("amp-scaler-healthy-short", "torch.amp", f"{P} scaler-healthy --steps 30 --every 1"),
    S("amp-scaler-collapse", "torch.amp", f"{P} scaler-collapse --steps 200", ["nan"]),
    S("amp-scaler-collapse-short", "torch.amp", f"{P} scaler-collapse --steps 60 --every 1", ["nan"]),
    S("plain-anomaly", "torch", f"{P} anomaly", ["nan"]),
    S("plain-cpu-oom", "torch", f"{P} cpu-oom", ["oom"]),
    S("plain-exit3", "torch", f"{P} exit3", ["crash"]),
    S("plain-argparse", "torch", f"{P} healthy --stepz 300", ["crash"], ["unrecognized arguments: --stepz 300"]),
    S("plain-keyboard", "torch", f"{P} keyboard", ["crash"], ["KeyboardInterrupt"]),
    S("plain-faulthandler-segv", "torch", "{py} -X faulthandler {prog}/plain.py segv", ["crash"],
      ["Segmentation fault"]),
    S("plain-faulthandler-abort", "torch", "{py} -X faulthandler {prog}/plain.py abort", ["crash"], ["Aborted"]),
    S("plain-long-healthy", "torch", f"{P} healthy --steps 600 --every 1"),
]
# -- the shell reporting a child's death -------------------------------------------------
for mode, expect, must in (("segv", ["crash"], ["Segmentation fault"]), ("abort", ["crash"], ["Aborted"]),
                           ("sigkill", ["oom"], ["Killed"]), ("sigbus", ["crash"], ["Bus error"]),
                           ("sigill", ["crash"], ["Illegal instruction"]),
                           ("sigfpe", ["crash"], ["Floating point exception"])):
    SCENARIOS.append(S(f"bash-{mode}", "bash", f"bash -c '{P} {mode}; echo \"train.sh: exit $?\"'", expect, must))
    SCENARIOS.append(S(f"bash-script-{mode}", "bash",
                       f"printf '%s\\n' 'set -u' '{P} {mode}' 'echo done' > {{tmp}}/train.sh && bash {{tmp}}/train.sh",
                       expect, must))
SCENARIOS.append(S("bash-healthy", "bash", f"bash -c '{P} healthy; echo \"train.sh: exit $?\"'"))
SCENARIOS.append(S("bash-script-healthy", "bash",
                   f"printf '%s\\n' 'set -u' '{P} tempting' 'echo done' > {{tmp}}/train.sh && bash {{tmp}}/train.sh"))
SCENARIOS.append(S("plain-tempting-long", "torch", f"{P} tempting --steps 300 --every 1 --fmt dict"))
# -- DataLoader workers ------------------------------------------------------------------
SCENARIOS += [
    S("dataloader-worker-error", "torch-dataloader", "{py} {prog}/dataloader_run.py worker-error", ["crash"],
      ["ValueError"]),
    S("dataloader-worker-killed", "torch-dataloader", "{py} {prog}/dataloader_run.py worker-killed", ["oom"],
      ["DataLoader worker"]),
    S("dataloader-worker-segv", "torch-dataloader", "{py} {prog}/dataloader_run.py worker-segv", ["crash"],
      ["DataLoader worker"]),
    S("dataloader-healthy", "torch-dataloader", "{py} {prog}/dataloader_run.py healthy"),
    S("dataloader-healthy-bash", "torch-dataloader", "bash -c '{py} {prog}/dataloader_run.py healthy; echo $?'"),
]
# -- transformers' Trainer ---------------------------------------------------------------
H = "{py} {prog}/hf_trainer.py"
SCENARIOS += [
    S("hf-healthy", "transformers", f"{H} healthy"),
    S("hf-print-args", "transformers", f"{H} print-args"),
    S("hf-nan", "transformers", f"{H} nan", ["nan"]),
    S("hf-nan-filtered", "transformers", f"{H} nan-filtered", ["nan"]),
    S("hf-grad-inf", "transformers", f"{H} grad-inf", ["nan"]),
    S("hf-callback-error", "transformers", f"{H} callback-error", ["crash"], ["ValueError"]),
    S("hf-eval-error", "transformers", f"{H} eval-error", ["crash"], ["RuntimeError"]),
    S("hf-print-args-piped", "transformers", f"{H} print-args 2>&1 | cat"),
    S("hf-disable-tqdm-healthy", "transformers", f"{H} healthy | cat"),
]
# -- Lightning ---------------------------------------------------------------------------
L_ = "{py} {prog}/lightning_run.py"
for bar in ("", " --tqdm"):
    tag = "-tqdm" if bar else ""
    SCENARIOS += [
        S(f"lightning-healthy{tag}", "lightning", f"{L_} healthy{bar}"),
        S(f"lightning-healthy-piped{tag}", "lightning", f"{L_} healthy{bar} 2>&1 | cat"),
        S(f"lightning-nan{tag}", "lightning", f"{L_} nan{bar}", ["nan"]),
        S(f"lightning-step-error{tag}", "lightning", f"{L_} step-error{bar}", ["crash"], ["RuntimeError"]),
        S(f"lightning-val-error{tag}", "lightning", f"{L_} val-error{bar}", ["crash"], ["RuntimeError"]),
        S(f"lightning-anomaly{tag}", "lightning", f"{L_} anomaly{bar}", ["nan"]),
    ]
# -- torchrun / elastic ------------------------------------------------------------------
TR = "{bin}/torchrun --nproc_per_node 2 --master_port {port}"
for tee in ("", " --tee 3"):
    tag = "-tee" if tee else ""
    SCENARIOS += [
        S(f"torchrun-healthy{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py healthy"),
        S(f"torchrun-tempting{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py tempting"),
        S(f"torchrun-exception{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py exception", ["crash"],
          ["ValueError"]),
        S(f"torchrun-segv{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py segv", ["crash"],
          ["rank 1", "SIGSEGV"]),
        S(f"torchrun-abort{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py abort", ["crash"],
          ["rank 1", "SIGABRT"]),
        S(f"torchrun-sigkill{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py sigkill", ["oom"],
          ["rank 1", "SIGKILL"]),
        S(f"torchrun-exit{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py exit", ["crash"], ["rank 1"]),
        S(f"torchrun-gloo-timeout{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py gloo-timeout", ["hang"]),
        S(f"torchrun-nan{tag}", "torchrun", f"{TR}{tee} {{prog}}/dist_worker.py nan", ["nan"]),
    ]
SCENARIOS.append(S("torchrun-rank0-exception", "torchrun",
                   f"{TR} {{prog}}/dist_worker.py exception --bad-rank 0", ["crash"], ["ValueError"]))
# -- DeepSpeed's launcher ----------------------------------------------------------------
DS = "{bin}/deepspeed --num_gpus 2 --master_port {port}"
for mode, expect, must in (("healthy", [], []), ("tempting", [], []), ("exception", ["crash"], ["ValueError"]),
                           ("segv", ["crash"], ["SIGSEGV"]), ("abort", ["crash"], ["SIGABRT"]),
                           ("sigkill", ["oom"], ["SIGKILL"]), ("exit", ["crash"], ["return code = 3"]),
                           ("gloo-timeout", ["hang"], []), ("nan", ["nan"], [])):
    SCENARIOS.append(S(f"deepspeed-{mode}", "deepspeed", f"{DS} {{prog}}/dist_worker.py {mode}", expect, must,
                       env={"DS_ACCELERATOR": "cpu"}))
# DeepSpeed's real DynamicLossScaler over real fp16 gradients (its own log wording)
for mode, expect in (("healthy", []), ("collapse", ["nan"]), ("hysteresis", ["nan"])):
    SCENARIOS.append(S(f"deepspeed-loss-scaler-{mode}", "deepspeed", f"{{py}} {{prog}}/ds_loss_scaler.py {mode}",
                       expect, env={"DS_ACCELERATOR": "cpu"}))
# -- accelerate launch (one CPU process: accelerate's simple launcher) -------------------
AC = "{bin}/accelerate launch --cpu --num_processes 1"
for mode, expect, must in (("healthy", [], []), ("segv", ["crash"], ["SIGSEGV"]), ("abort", ["crash"], ["SIGABRT"]),
                           ("sigkill", ["oom"], ["SIGKILL"]), ("backward-twice", ["crash"], ["RuntimeError"]),
                           ("nan", ["nan"], []), ("exit3", ["crash"], ["fatal: shard index out of sync"])):
    SCENARIOS.append(S(f"accelerate-{mode}", "accelerate", f"{AC} {{prog}}/plain.py {mode}", expect, must))
SCENARIOS.append(S("accelerate-tempting", "accelerate", f"{AC} {{prog}}/plain.py tempting"))
SCENARIOS.append(S("accelerate-hf-print-args", "accelerate", f"{AC} {{prog}}/hf_trainer.py print-args"))
SCENARIOS.append(S("accelerate-hf-healthy", "accelerate", f"{AC} {{prog}}/hf_trainer.py healthy"))
SCENARIOS.append(S("accelerate-hf-callback-error", "accelerate", f"{AC} {{prog}}/hf_trainer.py callback-error",
                   ["crash"], ["ValueError"]))
# -- torch.multiprocessing.spawn (Lightning's ddp_spawn, many scripts) --------------------
for mode, expect, must in (("healthy", [], []), ("segv", ["crash"], ["SIGSEGV"]), ("exception", ["crash"], ["KeyError"])):
    SCENARIOS.append(S(f"mp-spawn-{mode}", "torch.multiprocessing", f"{{py}} {{prog}}/mp_spawn.py {mode}", expect, must))
# -- torch.compile -----------------------------------------------------------------------
SCENARIOS += [
    S("dynamo-recompile-limit", "torch.compile", "{py} {prog}/dynamo_run.py recompile-limit", ["recompile"],
      ["recompile_limit"]),
    S("dynamo-recompiles-logged", "torch.compile", "{py} {prog}/dynamo_run.py recompiles", [],
      env={"TORCH_LOGS": "recompiles"}),
    S("dynamo-dynamic-healthy", "torch.compile", "{py} {prog}/dynamo_run.py dynamic"),
    S("inductor-lowering", "torch.compile", "{py} {prog}/dynamo_run.py lowering", ["crash", "recompile"],
      ["LoweringException"]),
]
# -- wandb offline -----------------------------------------------------------------------
for mode, expect, must in (("healthy", [], []), ("healthy2", [], []), ("nan", ["nan"], []),
                           ("crash", ["crash"], ["ConnectionError"])):
    SCENARIOS.append(S(f"wandb-offline-{mode}", "wandb", f"{{py}} {{prog}}/wandb_run.py {mode}", expect, must,
                       env={"WANDB_MODE": "offline", "WANDB_DIR": "{tmp}", "WANDB_SILENT": "false"}))
SCENARIOS.append(S("wandb-server-unreachable", "wandb", "{py} {prog}/wandb_unreachable.py", ["crash"], ["CommError"],
                   env={"WANDB_BASE_URL": "http://127.0.0.1:9", "WANDB_API_KEY": "local-" + "x" * 40,
                        "WANDB_DIR": "{tmp}", "WANDB_SILENT": "false"}))
# -- IPython -----------------------------------------------------------------------------
for mode, expect, must in (("shape", ["crash"], ["RuntimeError"]), ("assert", ["crash"], ["AssertionError"]),
                           ("nan", ["nan"], []), ("healthy", [], [])):
    SCENARIOS.append(S(f"ipython-{mode}", "ipython",
                       f"{{bin}}/ipython --colors=nocolor --no-banner {{prog}}/ipython_cell.py {mode}", expect, must,
                       env={"IPYTHONDIR": "{tmp}/ipy"}))


# -- added in the second round (issue 14's gaps): more healthy runs full of tempting words,
# real fp16 on CPU, losses that print 0.0, restarts, more launchers' ways to end ----------
FP16 = "{py} {prog}/plain.py fp16-"
for fmt in ("kv", "dict", "pipe", "bracket", "mainloss"):
    SCENARIOS.append(S(f"amp-fp16-search-healthy-{fmt}", "torch.amp", f"{FP16}healthy --fmt {fmt} --steps 40 --every 2"))
# logged every step: the search's first five records all read grad_norm nan/inf (healthy)
SCENARIOS.append(S("amp-fp16-search-healthy-every-step", "torch.amp", f"{FP16}healthy --fmt dict --steps 40 --every 1"))
for fmt in ("kv", "dict", "pipe"):
    SCENARIOS.append(S(f"amp-fp16-collapse-{fmt}", "torch.amp", f"{FP16}collapse --fmt {fmt} --steps 60 --every 3",
                       ["nan"]))
for fmt in ("dict", "kv", "pipe"):
    SCENARIOS.append(S(f"plain-loss-zero-nan-{fmt}", "torch", f"{P} zero-nan --fmt {fmt} --every 2", ["nan"],
                       ["loss pinned at 0.0"]))
for fmt in ("dict", "kv"):
    SCENARIOS += [
        S(f"plain-loss-zero-healthy-{fmt}", "torch", f"{P} zero-healthy --fmt {fmt} --steps 60"),
        S(f"plain-frozen-healthy-{fmt}", "torch", f"{P} frozen --fmt {fmt} --every 2"),
        S(f"plain-warnings-healthy-{fmt}", "torch", f"{P} warnings --fmt {fmt}"),
    ]
SCENARIOS += [
    S("plain-tqdm-healthy", "torch", f"{P} tqdm-healthy"),
    S("plain-tqdm-nan", "torch", f"{P} tqdm-nan", ["nan"]),
    S("plain-retry-healthy", "torch", f"{P} retry"),
    S("plain-retry-healthy-pipe", "torch", f"{P} retry --fmt pipe"),
    S("plain-handled-long-dict", "torch", f"{P} handled --fmt dict --steps 80"),
    S("plain-cpu-oom-dict", "torch", f"{P} cpu-oom --fmt dict", ["oom"]),
    S("bash-sigterm", "bash", f"bash -c '{P} sigterm; echo \"train.sh: exit $?\"'", ["crash"]),
    S("bash-script-sigterm", "bash",
      f"printf '%s\\n' 'set -u' '{P} sigterm' 'echo done' > {{tmp}}/train.sh && bash {{tmp}}/train.sh", ["crash"]),
    S("bash-tee-faulthandler-segv", "bash", "{py} -X faulthandler {prog}/plain.py segv 2>&1 | tee {tmp}/train.log",
      ["crash"], ["Segmentation fault"]),
    S("bash-tee-faulthandler-abort", "bash", "{py} -X faulthandler {prog}/plain.py abort 2>&1 | tee {tmp}/train.log",
      ["crash"], ["Aborted"]),
    S("dataloader-worker-abort", "torch-dataloader", "{py} {prog}/dataloader_run.py worker-abort", ["crash"],
      ["DataLoader worker"]),
    S("dataloader-worker-timeout", "torch-dataloader", "{py} {prog}/dataloader_run.py worker-slow", ["crash"],
      ["DataLoader timed out"]),
]
for mode, expect, must in (("eval-healthy", [], []), ("grad-accum", [], []), ("zero-nan", ["nan"], ["loss pinned at 0.0"]),
                           ("zero-nan-unfiltered", ["nan"], []), ("zero-healthy", [], []), ("frozen", [], []),
                           ("on-log-error", ["crash"], ["TypeError"]),
                           # SIGKILLed mid-transfer of a shared batch: the main process sees a reset pipe
                           ("worker-kill", ["crash"], ["ConnectionResetError"]),
                           ("worker-error", ["crash"], ["OSError"]), ("cpu-oom", ["oom"], [])):
    SCENARIOS.append(S(f"hf-{mode}", "transformers", f"{H} {mode}", expect, must))
SCENARIOS.append(S("hf-eval-healthy-piped", "transformers", f"{H} eval-healthy 2>&1 | cat"))
for mode, expect, must in (("callback-error", ["crash"], ["FileNotFoundError"]),
                           ("callback-error --tqdm", ["crash"], ["FileNotFoundError"]),
                           ("validate-error", ["crash"], ["RuntimeError"]), ("validate-healthy", [], []),
                           ("oom", ["oom"], []), ("optim-error", ["crash"], ["ValueError"]), ("tempting", [], []),
                           ("tempting --tqdm", [], []), ("loss-zero-healthy", [], [])):
    SCENARIOS.append(S(f"lightning-{mode.replace(' --', '-')}", "lightning", f"{L_} {mode}", expect, must))
DW = "{prog}/dist_worker.py"
SCENARIOS += [
    S("torchrun-restart-recovers", "torchrun", f"{TR} --max-restarts 1 {DW} restart-recovers"),
    S("torchrun-restart-recovers-tee", "torchrun", f"{TR} --max-restarts 1 --tee 3 {DW} restart-recovers"),
    S("torchrun-restart-exhausted", "torchrun", f"{TR} --max-restarts 2 {DW} restart-exhausted", ["crash"],
      ["ValueError"]),
    S("torchrun-sigterm", "torchrun", f"{TR} {DW} sigterm", ["crash"], ["rank 1", "SIGTERM"]),
    S("torchrun-exit1", "torchrun", f"{TR} {DW} exit1", ["crash"], ["rank 1"]),
    S("torchrun-gloo-barrier", "torchrun", f"{TR} {DW} gloo-barrier", ["hang"]),
    S("torchrun-gloo-timeout-rank0", "torchrun", f"{TR} {DW} gloo-timeout --bad-rank 0", ["hang"]),
    S("torchrun-nan-rank0", "torchrun", f"{TR} {DW} nan --bad-rank 0", ["nan"]),
    S("torchrun-segv-rank0-tee", "torchrun", f"{TR} --tee 3 {DW} segv --bad-rank 0", ["crash"], ["rank 0", "SIGSEGV"]),
    S("deepspeed-sigterm", "deepspeed", f"{DS} {DW} sigterm", ["crash"], env={"DS_ACCELERATOR": "cpu"}),
    S("deepspeed-gloo-barrier", "deepspeed", f"{DS} {DW} gloo-barrier", ["hang"], env={"DS_ACCELERATOR": "cpu"}),
    S("accelerate-hf-loss-zero-nan", "accelerate", f"{AC} {{prog}}/hf_trainer.py zero-nan", ["nan"],
      ["loss pinned at 0.0"]),
    S("accelerate-sigterm", "accelerate", f"{AC} {{prog}}/plain.py sigterm", ["crash"]),
]
for mode, expect, must in (("sigkill", ["oom"], ["SIGKILL"]), ("abort", ["crash"], ["SIGABRT"]),
                           ("exit", ["crash"], []), ("tempting", [], [])):
    SCENARIOS.append(S(f"mp-spawn-{mode}", "torch.multiprocessing", f"{{py}} {{prog}}/mp_spawn.py {mode}", expect, must))
SCENARIOS += [
    S("dynamo-recompile-shape", "torch.compile", "{py} {prog}/dynamo_run.py recompile-shape", ["recompile"],
      ["recompile_limit"]),
    S("dynamo-fullgraph-break", "torch.compile", "{py} {prog}/dynamo_run.py fullgraph-break", ["crash"],
      ["Unsupported"]),
    S("dynamo-graph-breaks-healthy", "torch.compile", "{py} {prog}/dynamo_run.py graph-breaks",
      env={"TORCH_LOGS": "graph_breaks"}),
]
WB = {"WANDB_MODE": "offline", "WANDB_DIR": "{tmp}", "WANDB_SILENT": "false"}
SCENARIOS += [
    S("wandb-offline-tempting", "wandb", "{py} {prog}/wandb_run.py tempting", env=WB),
    S("wandb-offline-sigkill", "wandb", "bash -c '{py} {prog}/wandb_run.py sigkill; echo \"exit $?\"'", ["oom"],
      ["Killed"], env=WB),
]
# -- Keras 3 on the torch backend: Keras-style `loss: nan`, TerminateOnNaN, its own errors --
KR = "{py} {prog}/keras_run.py"
for mode, expect, must in (("healthy", [], []), ("healthy --verbose 2", [], []), ("tempting --verbose 2", [], []),
                           ("nan", ["nan"], []), ("nan --verbose 2", ["nan"], []), ("terminate", ["nan"], []),
                           ("shape", ["crash"], ["ValueError"])):   # fails before any line verbose changes
    SCENARIOS.append(S(f"keras-{mode.replace(' --verbose 2', '-v2')}", "keras", f"{KR} {mode}", expect, must,
                       env={"KERAS_BACKEND": "torch"}))
for mode, expect, must in (("keyerror", ["crash"], ["KeyError"]), ("tempting", [], [])):
    SCENARIOS.append(S(f"ipython-{mode}", "ipython",
                       f"{{bin}}/ipython --colors=nocolor --no-banner {{prog}}/ipython_cell.py {mode}", expect, must,
                       env={"IPYTHONDIR": "{tmp}/ipy"}))


def run_one(sc: Scenario, port: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        cmd = sc.command.format(py=shlex.quote(sys.executable), bin=shlex.quote(str(VENV_BIN)),
                                prog="tests/corpus/programs", tmp=tmp, port=port)
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
                   HF_HUB_OFFLINE="1", WANDB_SILENT="true", COLUMNS="120")
        env.update({k: v.format(tmp=tmp) for k, v in sc.env.items()})
        t0 = time.time()
        try:
            proc = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, timeout=sc.timeout_s, stdin=subprocess.DEVNULL)
            out, rc = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as exc:
            out, rc = (exc.stdout or b"") + b"\n[generator: timed out]\n", None
        text = out.decode("utf-8", "replace")
        for prefix in (str(ROOT), "/work/main", tmp):
            text = text.replace(prefix, "/src" if prefix != tmp else "/tmp/run")
        (LOGS / f"{sc.name}.log").write_text(text)
        return dict(asdict(sc), heldout=sc.heldout, exit_code=rc, seconds=round(time.time() - t0, 1),
                    command=sc.command)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    LOGS.mkdir(exist_ok=True)
    index = json.loads(INDEX.read_text()) if INDEX.exists() else {}
    todo = [s for s in SCENARIOS if not args.only or s.name in args.only]
    with ThreadPoolExecutor(args.jobs) as pool:
        futs = {pool.submit(run_one, s, 29600 + 7 * i): s for i, s in enumerate(todo)}
        for fut, s in futs.items():
            entry = fut.result()
            index[s.name] = {k: v for k, v in entry.items() if k != "name"}
            print(f"{s.name}: exit {entry['exit_code']} in {entry['seconds']} s", flush=True)
            INDEX.write_text(json.dumps(dict(sorted(index.items())), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
