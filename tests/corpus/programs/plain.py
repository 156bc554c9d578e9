"""A plain PyTorch training script with many ways to end (corpus generator program).

Usage: python plain.py MODE [--fmt FMT] [--steps N]. Each MODE ends the run the way real
runs end (a real exception raised by torch, a real signal, a NaN produced by the maths);
FMT picks how the script prints its metrics, in the styles training scripts use
(a dict, key=value, a pipe table, bracketed values, a Megatron-style line).
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import signal
import sys
import threading
import time
import traceback

import torch


def model_and_data(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    x = torch.randn(64, 16)
    y = x.sum(dim=1, keepdim=True)
    return model, x, y


def fmt_line(fmt: str, step: int, total: int, loss: float, grad_norm: float, lr: float, tok: float) -> str:
    if fmt == "dict":
        return str({"loss": round(loss, 4) if math.isfinite(loss) else loss,
                    "grad_norm": grad_norm if not math.isfinite(grad_norm) else round(grad_norm, 4),
                    "learning_rate": lr, "epoch": round(step / total, 2)})
    if fmt == "pipe":
        return (f" iteration {step:8d}/{total:8d} | consumed samples: {step * 64:10d} | elapsed time per iteration"
                f" (ms): 812.4 | learning rate: {lr:.6E} | global batch size: 64 | lm loss: {loss:.6E} |"
                f" loss scale: 1.0 | grad norm: {grad_norm:.3f} | number of skipped iterations: 0 |"
                f" number of nan iterations: {0 if math.isfinite(loss) else 1} |")
    if fmt == "bracket":
        return f"Epoch [1/1] Step [{step}/{total}] loss [{loss:.4f}] grad_norm [{grad_norm:.4f}] lr [{lr:.2e}]"
    if fmt == "mainloss":
        return f"step {step}/{total} Loss {loss:.4f} Main Loss {loss:.4f} Aux Loss 0.0012 tok/s {tok:.0f}"
    return f"step={step} loss={loss:.4f} grad_norm={grad_norm:.4f} lr={lr:.2e} tok_per_s={tok:.1f}"


def train(args, nan_at: int | None = None, inf_grad_at: int | None = None, hook=None) -> None:
    model, x, y = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    print(f"config: steps={args.steps} lr=1e-3 detect_nan=True skip_nan_steps=False nan_guard=on", flush=True)
    print("number of nan iterations: 0 (resumed from scratch)", flush=True)
    for step in range(1, args.steps + 1):
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        if nan_at is not None and step >= nan_at:
            loss = loss * torch.tensor(float("nan"))
        opt.zero_grad()
        loss.backward()
        if inf_grad_at is not None and step >= inf_grad_at:
            for p in model.parameters():
                p.grad.fill_(float("inf"))
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9))
        opt.step()
        if hook is not None:
            hook(step, model, x)
        if step % args.every == 0:
            print(fmt_line(args.fmt, step, args.steps, float(loss), gn, 1e-3, 12000.0 + step), flush=True)
    print("training finished: {} steps, best loss {:.4f}".format(args.steps, 0.0123), flush=True)


def scaler_run(args, collapse: bool) -> None:
    """torch.amp.GradScaler on CPU (fp16's default init scale 65536). Healthy: the first
    two steps' gradients overflow (as an fp16 start-up does), the scaler skips them and
    halves (the normal loss-scale search), then grows back every growth_interval steps.
    Collapse: the gradients are Inf every step after step 10, so every step is skipped
    and the scale halves until it is tiny."""
    model, x, y = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=65536.0, growth_interval=20)
    skipped = 0
    for step in range(1, args.steps + 1):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        if (collapse and step > 10) or (not collapse and step in (2, 3)):
            for p in model.parameters():
                p.grad.fill_(float("inf"))
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        after = scaler.get_scale()
        if after < before:
            skipped += 1
            print(f"step {step}: grad scaler found inf/nan grads, skipped the step; loss scale {before:g} -> "
                  f"{after:g}", flush=True)
        if step % args.every == 0:
            print(f"step={step} loss={loss.item():.4f} loss_scale={after:g} skipped={skipped} tok_per_s=11000",
                  flush=True)


def fp16_run(args, collapse: bool) -> None:
    """Real fp16 on CPU: torch.autocast(float16) and torch.amp.GradScaler("cpu"). The scale
    starts high (2**20), so the first steps' scaled gradients overflow fp16 and the scaler
    halves it a few times: the normal loss-scale search. Collapse: from step 15 the batch
    holds values fp16 cannot carry (a corrupt shard), the forward overflows, every step is
    skipped and the scale halves towards zero."""
    model, x, y = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 20, growth_interval=25)
    skipped = 0
    print(f"fp16: autocast float16, GradScaler init_scale={scaler.get_scale():g}, logging_nan_inf_filter=True",
          flush=True)
    for step in range(1, args.steps + 1):
        xb = x * 1e4 if collapse and step >= 15 else x
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(xb).float(), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9))
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        after = scaler.get_scale()
        if after < before:
            skipped += 1
            if args.fmt == "kv":
                print(f"[amp] step {step}: overflow, skipped; loss_scale {before:g} -> {after:g}", flush=True)
        if step % args.every == 0:
            if args.fmt == "kv":
                print(f"step={step} loss={loss.item():.4f} grad_norm={gn:.4f} loss_scale={after:g} "
                      f"skipped={skipped} tok_per_s={11000 + step}", flush=True)
            else:
                print(fmt_line(args.fmt, step, args.steps, loss.item(), gn, 1e-3, 11000.0 + step)
                      .replace("loss scale: 1.0", f"loss scale: {after:.1f}"), flush=True)
    print(f"done: {skipped} skipped steps", flush=True)


def masked_loss_run(args, mode: str) -> None:
    """Losses that print 0.0. `zero-nan`: from step 12 every label is masked out; the loss
    is a torch.where over the masked rows, so the forward is exactly 0.0 while the backward
    through the untaken branch (sqrt of a negative) is NaN: grad_norm nan every step, the
    weights turn NaN after the first such step, the loss stays 0.0. `zero-healthy`: an
    easy task the model fits, so the rounded loss reaches 0.0 and stays there with small
    finite gradients. `frozen`: the first 10 steps are a frozen warm-up (loss detached),
    grad_norm 0.0 there, then normal training."""
    torch.manual_seed(0)
    if mode == "zero-healthy":
        model = torch.nn.Linear(4, 1)
        x = torch.randn(64, 4)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.25
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
    else:
        model, x, y = model_and_data()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for step in range(1, args.steps + 1):
        out = model(x)
        if mode == "zero-nan" and step >= 12:
            keep = torch.zeros_like(out, dtype=torch.bool)
            loss = torch.where(keep, torch.sqrt(out - 1e6), torch.zeros_like(out)).sum()
        else:
            loss = torch.nn.functional.mse_loss(out, y)
        if mode == "frozen" and step <= 10:
            loss = loss.detach() + 0 * sum(p.sum() for p in model.parameters())
        opt.zero_grad()
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9))
        opt.step()
        if step % args.every == 0:
            print(fmt_line(args.fmt, step, args.steps, loss.item(), gn, 1e-3, 10500.0 + step), flush=True)
    print("training finished", flush=True)


def tqdm_run(args, nan: bool) -> None:
    """A tqdm bar with a loss postfix, as many hand-written loops print it."""
    from tqdm import tqdm

    model, x, y = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    bar = tqdm(range(1, args.steps + 1), desc="train", mininterval=0, file=sys.stdout)
    for step in bar:
        loss = torch.nn.functional.mse_loss(model(x), y)
        if nan and step >= args.steps // 2:
            loss = loss * float("nan")
        opt.zero_grad()
        loss.backward()
        opt.step()
        bar.set_postfix(loss=loss.item(), lr=1e-3, nan_skips=0)
    bar.close()
    print("epoch done", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(prog="plain.py")
    ap.add_argument("mode")
    ap.add_argument("--fmt", default="kv")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=5)
    args = ap.parse_args()
    m = args.mode
    if m == "healthy":
        train(args)
    elif m == "tempting":
        # words a naive grep flags, printed by healthy runs
        print("nan_guard: enabled (skip_nan_steps=False, logging_nan_inf_filter=True)", flush=True)
        print("OOM guard: max_split_size_mb=512; out-of-memory retries: 0", flush=True)
        print("dataset: 0 corrupt samples, 0 errors, error_rate=0.000, killed workers: 0", flush=True)
        print("download failed (attempt 1/3), retrying... ok", flush=True)
        print("INFO: checking for inf/nan in gradients: none found", flush=True)
        train(args)
        print("number of nan iterations: 0 | number of skipped iterations: 0", flush=True)
        print("Segmentation fault handler installed; Traceback printing enabled; exit code 0", flush=True)
    elif m in ("scaler-healthy", "scaler-collapse"):
        scaler_run(args, collapse=(m == "scaler-collapse"))
    elif m == "nan":
        train(args, nan_at=args.steps // 2)
    elif m == "inf-grad":
        train(args, inf_grad_at=args.steps // 2)
    elif m == "backward-twice":
        def hook(step, model, x):
            if step == 20:
                h = model(x).sum()
                h.backward(retain_graph=False)
                h.backward()
        train(args, hook=hook)
    elif m == "shape":
        def hook(step, model, x):
            if step == 25:
                model(x[:, :8])
        train(args, hook=hook)
    elif m == "index":
        def hook(step, model, x):
            if step == 12:
                torch.nn.Embedding(10, 4)(torch.tensor([3, 12]))
        train(args, hook=hook)
    elif m == "keyerror":
        def hook(step, model, x):
            if step == 30:
                batch = {"input_ids": x}
                batch["labels"]
        train(args, hook=hook)
    elif m == "chained":
        def hook(step, model, x):
            if step == 15:
                try:
                    open("/nonexistent/shard-00017.bin")
                except FileNotFoundError as exc:
                    raise RuntimeError("could not load the next data shard") from exc
        train(args, hook=hook)
    elif m == "thread":
        def worker():
            time.sleep(0.05)
            raise ValueError("prefetch queue got a batch of the wrong dtype")
        threading.Thread(target=worker, name="prefetch-0").start()
        train(args)
    elif m == "handled":
        def hook(step, model, x):
            if step == 10:
                try:
                    torch.load("/nonexistent/ckpt.pt")
                except FileNotFoundError:
                    traceback.print_exc()
                    print("checkpoint not found, retrying from scratch; continuing training", flush=True)
        train(args, hook=hook)
    elif m == "anomaly":
        torch.autograd.set_detect_anomaly(True)
        def hook(step, model, x):
            if step == 20:
                w = torch.zeros(3, requires_grad=True)
                (torch.sqrt(w - 1.0) * 0).sum().backward()
        train(args, hook=hook)
    elif m == "cpu-oom":
        def hook(step, model, x):
            if step == 20:
                torch.empty(1 << 50, dtype=torch.uint8)
        train(args, hook=hook)
    elif m in ("segv", "abort", "sigkill", "sigbus", "sigill", "sigfpe"):
        def hook(step, model, x):
            if step == 20:
                sys.stdout.flush()
                if m == "segv":
                    ctypes.string_at(0)
                elif m == "abort":
                    os.abort()
                else:
                    sig = {"sigkill": signal.SIGKILL, "sigbus": signal.SIGBUS, "sigill": signal.SIGILL,
                           "sigfpe": signal.SIGFPE}[m]
                    os.kill(os.getpid(), sig)
        train(args, hook=hook)
    elif m in ("fp16-healthy", "fp16-collapse"):
        fp16_run(args, collapse=(m == "fp16-collapse"))
    elif m in ("zero-nan", "zero-healthy", "frozen"):
        masked_loss_run(args, m)
    elif m in ("tqdm-healthy", "tqdm-nan"):
        tqdm_run(args, nan=(m == "tqdm-nan"))
    elif m == "warnings":
        # healthy, but printing real library warnings with Error/failed/nan in them
        import logging
        import warnings
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        log = logging.getLogger("train")
        warnings.simplefilter("always")
        log.info("data: /data/error_analysis/train-errors.jsonl, eval: /data/oom_ablation/nan_cases.jsonl")
        log.warning("tokenizer: 3 samples raised UnicodeDecodeError and were skipped (error_policy=skip)")
        model, x, y = model_and_data()
        torch.nn.functional.mse_loss(model(x), y.squeeze(1))  # torch warns: broadcasting target size
        sched_opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        torch.optim.lr_scheduler.StepLR(sched_opt, 10).step()  # torch warns: scheduler before optimizer
        warnings.warn("ErrorHandler is deprecated; use FaultPolicy(on_error='retry')", DeprecationWarning, stacklevel=1)
        train(args)
        log.info("eval: error_rate=0.031 nan_fraction=0.000 killed=0 failed_batches=0")
    elif m == "retry":
        # a transient failure, logged with its traceback, retried, and the run goes on
        import logging
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        log = logging.getLogger("data")
        state = {"tries": 0}

        def hook(step, model, x):
            if step == 8:
                for attempt in range(1, 4):
                    try:
                        state["tries"] += 1
                        if attempt < 3:
                            raise ConnectionResetError(104, "Connection reset by peer")
                        log.info("shard 00017 fetched on attempt %d", attempt)
                        break
                    except ConnectionResetError:
                        log.exception("fetching shard 00017 failed (attempt %d/3), retrying in 0s", attempt)
        train(args, hook=hook)
    elif m == "sigterm":
        def hook(step, model, x):
            if step == 20:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGTERM)
        train(args, hook=hook)
    elif m == "exit3":
        def hook(step, model, x):
            if step == 20:
                print("fatal: shard index out of sync with the sampler", file=sys.stderr, flush=True)
                sys.exit(3)
        train(args, hook=hook)
    elif m == "keyboard":
        # A shell that runs a job in the background leaves SIGINT ignored, and Python then
        # installs no handler: give it Python's, as an interactive terminal would.
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def hook(step, model, x):
            if step == 20:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)
        train(args, hook=hook)
    else:
        ap.error(f"unknown mode {m}")


if __name__ == "__main__":
    main()
