"""Issue 18's paper prediction: the threaded pipeline's throughput for t target GPUs : d
drafter GPUs, from stage times measured on one GPU.

    python bench/checks/split_model.py [bench/results/raw-h4/run7-vocab2048.json]

Model (steady state, queues deep enough that neither side waits on jitter): a step feeds one
batch of N tokens to each of the d drafter replicas (threads, one GPU each), so it takes

    step_s = max(D + c * (d - 1),  d * T / t)

D the drafter step (fwd+bwd+AdamW) per batch, T the target prefill per batch (t workers
share the d batches), c the per-extra-replica gradient gather + weight broadcast over
NVLink (2 x 1.09 GB of fp32 grads/weights at the measured 367 GiB/s = 6 ms). The host copy
(59 us) and queue hand-off (14 us) are measured and left out: 4 orders below the stages.
throughput = d * N / step_s. Checked against the recorded 1+1 runs with the stage times of
the code that produced them; the ratio measured / predicted there (eta) is applied to the
curve as the "calibrated" column.
"""

import json
import sys
from pathlib import Path

GRAD_SYNC_S = 2 * 1.09 / 367          # per extra replica: grads in, weights out (GB / GiB/s ~ s)
# The recorded 1+1 splits (bench/results/trainer.md runs 3 and 4) and the one-GPU stage
# times of that code (run 5: drafter 0.546 s eager / 0.399 s compiled; target 164.4K tok/s).
RECORDED = {"eager": {"tok_per_s": 67_961, "D": 0.546}, "compiled": {"tok_per_s": 83_200, "D": 0.399}}
RECORDED_TARGET_TOK_PER_S = 164_400
SPLITS = [(1, 1), (1, 2), (2, 3), (5, 3)]


def step_s(t: int, d: int, T: float, D: float) -> float:
    return max(D + GRAD_SYNC_S * (d - 1), d * T / t)


def main(path: str) -> None:
    res = json.loads(Path(path).read_text())
    me, mc = res["micro"]["micro-eager"], res["micro"]["micro-compiled"]
    N = me["real_tokens"] / me["batches"]
    T = me["target_step_s"]
    T_old = N / RECORDED_TARGET_TOK_PER_S
    print(f"stage times (this call): N={N:.0f} tok/batch T={T:.3f} s D_eager={me['drafter_step_s']:.3f} s "
          f"D_compiled={mc['drafter_step_s']:.3f} s h2d={me['h2d_copy_s'] * 1e6:.0f} us "
          f"handoff={me['queue_handoff_s'] * 1e6:.0f} us")
    eta = {}
    for mode, rec in RECORDED.items():
        pred = N / step_s(1, 1, T_old, rec["D"])
        eta[mode] = rec["tok_per_s"] / pred
        print(f"check 1+1 {mode}: predicted {pred:,.0f} tok/s, recorded {rec['tok_per_s']:,} -> eta {eta[mode]:.3f}")
    print("\n| t:d | mode | step s | bound by | predicted tok/s | calibrated (x eta) | vs 1-GPU sequential |")
    print("|---|---|---|---|---|---|---|")
    for mode, D in (("eager", me["drafter_step_s"]), ("compiled", mc["drafter_step_s"])):
        one_gpu = N / (T + D)
        for t, d in SPLITS:
            s = step_s(t, d, T, D)
            bound = "drafter" if D + GRAD_SYNC_S * (d - 1) >= d * T / t else "target"
            tps = d * N / s
            print(f"| {t}:{d} | {mode} | {s:.3f} | {bound} | {tps:,.0f} | {tps * eta[mode]:,.0f} | "
                  f"{tps * eta[mode] / one_gpu:.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1] / "results" / "raw-h4"
                                                    / "run7-vocab2048.json"))
