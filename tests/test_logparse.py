"""logparse: bounded line splitting and the line parser (progress, milestones, wandb)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.errors import BadInputError
from controller.follow.logparse import (
    CUT_MARK,
    LineParser,
    flush_carry,
    merge_wandb,
    parse_number,
    parse_wandb,
    split_lines,
)
from controller.records import WandbInfo

# ---------------------------------------------------------------------------------------
# split_lines
# ---------------------------------------------------------------------------------------


def _all_lines(chunks: list[bytes], cap: int | None = None) -> list[str]:
    kw = {"cap": cap} if cap else {}
    out, carry = [], b""
    for c in chunks:
        lines, carry = split_lines(c, carry, **kw)
        out.extend(lines)
    out.extend(flush_carry(carry, **kw))
    return out


def test_line_ends_lf_crlf_and_lone_cr():
    lines, carry = split_lines(b"a\nb\r\nc\rd", b"")
    assert lines == ["a", "b", "c"]
    assert carry == b"d"


def test_trailing_cr_waits_for_a_possible_lf():
    lines, carry = split_lines(b"x\r", b"")
    assert lines == [] and carry == b"x\r"
    lines, carry = split_lines(b"\ny\n", carry)
    assert lines == ["x", "y"] and carry == b""
    # ... and a lone \r followed by text is its own line end (tqdm redraws)
    lines, carry = split_lines(b"next\n", b"x\r")
    assert lines == ["x", "next"]


def test_tqdm_redraws_become_lines():
    raw = b" 10%|#         | 1/10 [00:01<00:09,  1.00it/s]\r 20%|##        | 2/10 [00:02<00:08,  1.00it/s]\r"
    lines = _all_lines([raw])
    assert [x.split("|")[0].strip() for x in lines] == ["10%", "20%"]


def test_ansi_nul_and_invalid_utf8_are_cleaned():
    raw = b"\x1b[34m\x1b[1mwandb\x1b[0m: \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ ok\x00\x00 \xff\xfe end\n"
    (line,), carry = split_lines(raw, b"")
    assert line == "wandb: link ok \ufffd\ufffd end"
    assert "\x1b" not in line and "\x00" not in line and carry == b""


def test_long_line_is_cut_and_flagged_with_bounded_carry():
    cap = 1024
    body = b"y" * (cap * 5 + 10)
    out, carry = [], b""
    for i in range(0, len(body), 700):  # chunks not aligned with the cap
        lines, carry = split_lines(body[i:i + 700], carry, cap=cap)
        out.extend(lines)
        assert len(carry) <= cap + 1
    out.extend(flush_carry(carry, cap=cap))
    assert len(out) == 6
    assert all(x.cut and x.endswith(CUT_MARK) for x in out[:5])
    assert not out[5].cut and out[5] == "y" * 10
    assert "".join(x.removesuffix(CUT_MARK) for x in out) == body.decode()


def test_hundred_megabyte_line_keeps_memory_bounded():
    """100 MB without a newline, fed as a follower would (1 MiB reads): the carry never
    passes the cap, and the pieces are all there."""
    chunk = b"z" * (1 << 20)
    carry = b""
    pieces = 0
    for _ in range(100):
        lines, carry = split_lines(chunk, carry)
        pieces += len(lines)
        assert len(carry) <= 64 * 1024 + 1
    pieces += len(flush_carry(carry))
    assert pieces == 100 * 16  # 1 MiB = 16 x 64 KiB


def test_cut_never_splits_a_utf8_character():
    cap = 10
    raw = ("é" * 20 + "\n").encode()  # 2 bytes each
    out = _all_lines([raw], cap=cap)
    assert all("\ufffd" not in x for x in out)
    assert "".join(x.removesuffix(CUT_MARK) for x in out) == "é" * 20


_pieces_of_text = st.lists(
    st.sampled_from([b"a", b"b\xc3\xa9", b"\n", b"\r", b"\r\n", b"\x00", b"\x1b[31m", b"\xff", b"step=1 ", b"xxxxxxxx"]),
    max_size=60)


@settings(max_examples=200, deadline=None)
@given(parts=_pieces_of_text, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_chunking_gives_the_same_lines(parts, cuts):
    data = b"".join(parts)
    whole = _all_lines([data], cap=16)
    points = sorted({min(c, len(data)) for c in cuts})
    chunks, prev = [], 0
    for p in points + [len(data)]:
        chunks.append(data[prev:p])
        prev = p
    assert _all_lines(chunks, cap=16) == whole
    assert [x.cut for x in _all_lines(chunks, cap=16)] == [x.cut for x in whole]


@settings(max_examples=150, deadline=None)
@given(parts=_pieces_of_text, cut=st.integers(min_value=0, max_value=400))
def test_restart_at_consumed_offset_loses_and_repeats_nothing(parts, cut):
    """The cursor contract: consumed = read - len(carry). A watcher killed after reading
    `cut` bytes restarts at that offset with an empty carry and sees the rest exactly."""
    data = b"".join(parts)
    cut = min(cut, len(data))
    first, carry = split_lines(data[:cut], b"", cap=16)
    consumed = cut - len(carry)
    rest = _all_lines([data[consumed:]], cap=16)
    assert first + rest == _all_lines([data], cap=16)


# ---------------------------------------------------------------------------------------
# numbers
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("21.5K", 21500.0), ("12.4k", 12400.0), ("10,050", 10050.0), ("1.2M", 1.2e6),
    ("1.000E-04", 1e-4), ("529,882", 529882.0), ("7", 7.0), ("-3.5", -3.5),
])
def test_parse_number(text, value):
    assert parse_number(text) == pytest.approx(value)


def test_parse_number_specials_and_garbage():
    assert math.isnan(parse_number("nan")) and parse_number("inf") == math.inf
    assert parse_number("abc") is None and parse_number("") is None


# ---------------------------------------------------------------------------------------
# progress lines
# ---------------------------------------------------------------------------------------

# (line, expected fields) -- where each wording came from is noted.
PROGRESS_CASES = [
    # README: the bundled trainer's contract
    ("[progress] step=120 loss=3.2145 acc=0.4120 tau=2.310 tok_per_s=21534.2 samples_per_s=12.30 "
     "step_time_s=0.812 data_wait_s=0.004 mem_alloc_gib=23.40 mem_peak_gib=25.10 lr=5.9e-04",
     dict(step=120, loss=3.2145, tok_per_s=21534.2, samples_per_s=12.3, step_time_s=0.812, data_wait_s=0.004,
          mem_peak_gib=25.1, lr=5.9e-4, tau=2.31)),
    # the seeds' own trainer
    ("Step 100: 12000 tok/s", dict(step=100, tok_per_s=12000.0)),
    ("step 120 | loss 3.21 | 21.5K tok/s", dict(step=120, loss=3.21, tok_per_s=21500.0)),
    # torchtitan (pytorch/torchtitan#2389), with the torchrun rank prefix
    ("[rank0]:[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: 26.6250  "
     "memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%",
     dict(step=4, loss=7.62585, tok_per_s=10050.0)),
    # nanochat (karpathy/nanochat#147): dt in ms, tok/sec with thousands commas
    ("step 00004/21400 (0.02%) | loss: 8.893647 | lrm: 1.00 | dt: 989.44ms | tok/sec: 529,882 | mfu: 74.13",
     dict(step=4, loss=8.893647, tok_per_s=529882.0, step_time_s=0.98944)),
    # Megatron-LM iteration line
    (" iteration      100/  500000 | consumed samples:        51200 | elapsed time per iteration (ms): 1234.5 | "
     "learning rate: 1.000E-04 | global batch size:   512 | lm loss: 7.123456E+00 | loss scale: 65536.0 | "
     "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |",
     dict(step=100, loss=7.123456, step_time_s=1.2345, lr=1e-4)),
    # DeepSpeed timer-style line
    ("steps: 100 loss: 2.3000 iter time (s): 0.500 samples/sec: 64.000", dict(step=100, loss=2.3, samples_per_s=64.0)),
    # tqdm / Lightning progress bars
    ("Epoch 0:  45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, v_num=0, train_loss=2.31]",
     dict(step=450, loss=2.31)),
    (" 14%|█▍        | 380/2724 [14:02:33<86:01:24, 132.12s/it]", dict(step=380, step_time_s=132.12)),
]


@pytest.mark.parametrize("line,expected", PROGRESS_CASES, ids=[c[0][:30] for c in PROGRESS_CASES])
def test_progress_lines(line, expected):
    sample = LineParser().parse(line).progress
    assert sample is not None
    for key, value in expected.items():
        assert getattr(sample, key) == pytest.approx(value), key


def test_a_progress_line_with_another_ranks_line_glued_on_keeps_its_last_value():
    """torchrun --tee copies each rank's writes as they come; print() writes a line's text and
    its newline apart, so rank 1's line landed before rank 0's newline in test_job_local's run
    on a loaded machine (the line below, as it was read there, numbers shortened): its `lr`
    was lost."""
    line = ("[rank0]:[progress] step=300 loss=1.1551 tok_per_s=8412.0 lr=9.8e-04"
            "[rank1]:[dist] rank=1 params_checksum=-51.234")
    sample = LineParser().parse(line).progress
    assert sample is not None and sample.step == 300 and sample.loss == pytest.approx(1.1551)
    assert sample.lr == pytest.approx(9.8e-4)


def test_hf_trainer_dicts_count_steps_and_keep_nan():
    p = LineParser()
    a = p.parse("{'loss': 2.0491, 'grad_norm': 1.3, 'learning_rate': 0.0001961913563176343, 'epoch': 0.28}").progress
    b = p.parse("{'loss': nan, 'grad_norm': nan, 'learning_rate': 0.000196, 'epoch': 0.29}").progress
    assert a.loss == pytest.approx(2.0491) and a.lr == pytest.approx(1.961913563176343e-4)
    assert b.step == a.step + 1 and math.isnan(b.loss)


@pytest.mark.parametrize("line", [
    "Loading checkpoint shards: 100%|██████████| 4/4 [00:10<00:00,  2.50s/it]",  # HF model loading bar
    "  Bucket 5 [3296,8193):  27882 batches ( 46.6%)",
    "Batches per epoch: 59823 (min=6 max=64 avg=18.3)",
    "[2023-04-28 06:59:46,878] [INFO] [logging.py:96:log_dist] [Rank 0] step=510, skipped=8, lr=[0.0001], mom=[(0.9, 0.95)]",
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 64, reducing to 32",
    "Dumping profiler traces at step 200",
    "",
])
def test_not_progress(line):
    assert LineParser().parse(line).progress is None


def test_custom_pattern_with_suffixes_and_no_step():
    p = LineParser(r"thr=(?P<tok_per_s>[\d.]+[KM]?) l=(?P<loss>[\d.]+)")
    a = p.parse("epoch 3 thr=21.5K l=2.5").progress
    b = p.parse("epoch 3 thr=12.4K l=2.4").progress
    assert a.tok_per_s == 21500.0 and a.loss == 2.5 and b.step == a.step + 1


@pytest.mark.parametrize("pattern,words", [
    ("(?P<step>\\d+", "not a valid regex"),
    ("step (\\d+)", "no named groups"),
    ("(?P<stepp>\\d+) (?P<tok_s>\\d+)", "stepp, tok_s"),
])
def test_bad_custom_pattern_is_bad_input(pattern, words):
    with pytest.raises(BadInputError, match="progress pattern") as exc:
        LineParser(pattern)
    assert words in exc.value.message


def test_milestones():
    p = LineParser()
    assert p.parse("[milestone] dataset_loaded samples=1095082").milestone == ("dataset_loaded", {"samples": "1095082"})
    assert p.parse("[milestone] first_step").milestone == ("first_step", {})
    assert p.parse("[milestone] target_loaded index=0 device=cuda:0").milestone == (
        "target_loaded", {"index": "0", "device": "cuda:0"})


# ---------------------------------------------------------------------------------------
# wandb
# ---------------------------------------------------------------------------------------

WANDB_CASES = [
    # the seeds (grep wandb train_opt2.log)
    ("wandb: 🚀 View run at https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w",
     "khjugi7w", "https://wandb.ai/aurorainfra/dflash-qwen36-27b/runs/khjugi7w", "online", None),
    # wandb 0.31 footer (wandb_run.py _footer_sync_info), with the ?nw= query newer versions add
    ("wandb: 🚀 View run fancy-sun-12 at: https://wandb.ai/ent/proj/runs/abc123de?nw=nwuserx",
     "abc123de", "https://wandb.ai/ent/proj/runs/abc123de", "online", None),
    # self-hosted WANDB_BASE_URL
    ("wandb: View run at http://wandb.corp.lan:8080/team/proj/runs/x1y2z3",
     "x1y2z3", "http://wandb.corp.lan:8080/team/proj/runs/x1y2z3", "online", None),
    # older clients
    ("wandb: Synced fancy-sun-12: https://wandb.ai/ent/proj/runs/3hd9k2l1",
     "3hd9k2l1", "https://wandb.ai/ent/proj/runs/3hd9k2l1", "online", None),
    ("wandb: Run data is saved locally in /ws/wandb/run-20241201_120000-abc123de", "abc123de", None, "online", None),
    ("wandb: Run data is saved locally in /ws/wandb/offline-run-20241201_120000-abc123de",
     "abc123de", None, "offline", "/ws/wandb/offline-run-20241201_120000-abc123de"),
    ("wandb: wandb sync /ws/wandb/offline-run-20241201_120000-abc123de",
     "abc123de", None, "offline", "/ws/wandb/offline-run-20241201_120000-abc123de"),
    ("wandb: W&B syncing is set to `offline` in this directory. Run `wandb online` or set WANDB_MODE=online "
     "to enable cloud syncing.", None, None, "offline", None),
    ("wandb: Syncing run fancy-sun-12", None, None, "online", None),
    ("wandb: Tracking run with wandb version 0.31.0", None, None, "unknown", None),
]


@pytest.mark.parametrize("line,run_id,url,mode,offline_dir", WANDB_CASES, ids=[c[0][7:40] for c in WANDB_CASES])
def test_wandb_lines(line, run_id, url, mode, offline_dir):
    info = LineParser().parse(line).wandb
    assert info is not None
    assert (info.run_id, info.url, info.mode, info.offline_dir) == (run_id, url, mode, offline_dir)


@pytest.mark.parametrize("line", [
    "wandb: ⭐️ View project at https://wandb.ai/aurorainfra/dflash-qwen36-27b",
    "wandb: loss ▁▂▃",
    "see https://github.com/org/repo/runs/12345 for CI",
    "Step 100: 12000 tok/s",
])
def test_not_wandb_run_lines(line):
    assert parse_wandb(line) is None


def test_merge_keeps_absolute_offline_dir_and_switches_on_new_run():
    a = parse_wandb("wandb: Run data is saved locally in /ws/wandb/offline-run-20241201_120000-abc123de")
    b = parse_wandb("wandb: Find logs at: wandb/offline-run-20241201_120000-abc123de/logs")
    merged = merge_wandb(merge_wandb(None, a), b)
    assert merged.offline_dir == "/ws/wandb/offline-run-20241201_120000-abc123de" and merged.mode == "offline"
    other = merge_wandb(merged, WandbInfo(run_id="zzz", url="https://wandb.ai/e/p/runs/zzz", mode="online"))
    assert other.run_id == "zzz" and other.offline_dir is None


def test_real_wandb_offline_output(tmp_path):
    """The real wandb library's printed lines (offline run), through the parser."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SILENT", "WANDB_API_KEY")}
    env.update(WANDB_MODE="offline", WANDB_DIR=str(tmp_path), HOME=str(tmp_path))
    code = "import wandb; r = wandb.init(project='dfctl-test', name='unit'); r.log({'loss': 1.0}); r.finish()"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    lines, carry = split_lines(proc.stdout + proc.stderr, b"")
    lines += flush_carry(carry)
    info = None
    for line in lines:
        info = merge_wandb(info, LineParser().parse(line).wandb)
    run_dirs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(run_dirs) == 1
    assert info is not None and info.mode == "offline"
    assert info.run_id == run_dirs[0].name.rsplit("-", 1)[1]
    assert info.offline_dir == str(run_dirs[0])


# ---------------------------------------------------------------------------------------
# pairing, not position (issue 26.1)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,expected", [
    # the seeds' hand-started run: the number before `tok/s` is the loss
    ("step 65 loss 1.4292 tok/s 6020", dict(step=65, loss=1.4292, tok_per_s=6020.0)),
    ("step 65 loss 1.4292 6020 tok/s", dict(step=65, loss=1.4292, tok_per_s=6020.0)),
    ("step 65 tokens/s: 6020 loss 1.4292", dict(step=65, loss=1.4292, tok_per_s=6020.0)),
    ("step=65 tokens_per_sec=6020 loss=1.4292", dict(step=65, loss=1.4292, tok_per_s=6020.0)),
    ("step 65 | 5.38 it/s | loss 1.4292", dict(step=65, loss=1.4292, step_time_s=1 / 5.38)),
    ("step 65 loss 1.4292 2.5 s/it", dict(step=65, loss=1.4292, step_time_s=2.5)),
    ("step 65 samples/s 12.5 loss 1.4292 tok/s 6020", dict(step=65, loss=1.4292, samples_per_s=12.5, tok_per_s=6020.0)),
    # found by test_a_keys_value_is_never_another_keys_value against the positional parser
    ("step 1 samples/s 0.0020 tok/s 0.0030", dict(step=1, samples_per_s=0.002, tok_per_s=0.003)),
    ("lr: 0.0030 step 1 loss 0.0020", dict(step=1, lr=0.003, loss=0.002)),
    ("step 1 0.0020 it/s", dict(step=1, step_time_s=500.0)),
])
def test_each_number_goes_to_the_word_that_names_it(line, expected):
    sample = LineParser().parse(line).progress
    assert sample is not None
    for key, value in expected.items():
        assert getattr(sample, key) == pytest.approx(value), key


def test_an_ambiguous_line_reads_as_nothing_not_a_wrong_number():
    # `tok/s` between two numbers: the unit of 6020 or the key of 1.42? Neither is read.
    sample = LineParser().parse("step 65 loss: 0.5 6020 tok/s 1.42").progress
    assert sample is not None and sample.loss == 0.5 and sample.tok_per_s is None
    assert LineParser().parse("step 65 6020 tok/s 1.42").progress is None
    # two tok/s figures that disagree, and src/tgt rates under one unit
    assert LineParser().parse("step 5 loss 2.0 tps: 100 tps: 200").progress.tok_per_s is None
    assert LineParser().parse("step 5 loss 2.0 5092/261 tok/s").progress.tok_per_s is None


_RATE_UNITS = {"tok_per_s": ["tok/s", "tokens/s", "tok/sec"], "samples_per_s": ["samples/s", "samples/sec"],
               "it_per_s": ["it/s"], "s_per_it": ["s/it"]}
_KEY_WORDS = {"step": ["step", "iter", "global_step"], "loss": ["loss", "train_loss"], "lr": ["lr", "learning_rate"],
              "tok_per_s": ["tok/s", "tokens/s", "tps", "tokens_per_sec", "tok_per_s"],
              "samples_per_s": ["samples/s", "samples_per_sec"], "it_per_s": [], "s_per_it": []}


@st.composite
def _progress_lines(draw):
    """A line of distinct figures, each written `key value`, `key: value`, `key=value` or
    (a rate) `value unit`, in any order with any of the usual separators."""
    names = ["step"] + draw(st.lists(st.sampled_from(["loss", "lr", "tok_per_s", "samples_per_s", "it_per_s",
                                                      "s_per_it"]), unique=True, min_size=1, max_size=5))
    if "it_per_s" in names and "s_per_it" in names:
        names.remove("s_per_it")
    values = draw(st.lists(st.integers(1, 999_999), min_size=len(names), max_size=len(names), unique=True))
    items, truth, strong = [], {}, set()
    for name, raw in zip(names, values):
        text = str(raw) if name == "step" else draw(st.sampled_from([f"{raw / 1000:.4f}", f"{raw / 10:.1f}", str(raw)]))
        truth[name] = float(text)
        forms = [f for f in ("kv", "kcolon", "keq") if _KEY_WORDS[name]] + (["vu"] if name in _RATE_UNITS else [])
        form = draw(st.sampled_from(forms))
        if form == "vu":
            items.append(f"{text} {draw(st.sampled_from(_RATE_UNITS[name]))}")
            continue
        key = draw(st.sampled_from(_KEY_WORDS[name]))
        items.append({"kv": f"{key} {text}", "kcolon": f"{key}: {text}", "keq": f"{key}={text}"}[form])
        if form != "kv":
            strong.add(name)
    order = draw(st.permutations(range(len(items))))
    seps = [draw(st.sampled_from([" ", "  ", " | ", ", ", "; "])) for _ in items]
    line = "".join(items[i] + sep for i, sep in zip(order, seps)).rstrip(" |,;")
    return line, truth, strong


@settings(max_examples=400, deadline=None)
@given(case=_progress_lines())
def test_a_keys_value_is_never_another_keys_value(case):
    line, truth, strong = case
    sample = LineParser().parse(line).progress
    own = {"step": truth["step"], "loss": truth.get("loss"), "lr": truth.get("lr"),
           "tok_per_s": truth.get("tok_per_s"), "samples_per_s": truth.get("samples_per_s"),
           "step_time_s": (1.0 / truth["it_per_s"]) if "it_per_s" in truth else truth.get("s_per_it")}
    got = {k: getattr(sample, k) for k in own} if sample is not None else {}
    for key, value in got.items():
        if value is not None:
            assert own[key] is not None and value == pytest.approx(own[key]), (line, key, value)
    if sample is None:    # only a step and an lr: no progress figure, not a progress line
        assert set(truth) <= {"step", "lr"}, line
        return
    for name in strong:   # `key: value` and `key=value` bind: always read
        assert sample is not None and getattr(sample, name) == pytest.approx(truth[name]), (line, name)


_CONTRACT_PIECES = st.sampled_from([
    "step=", "loss=", "tok_per_s=", "tok_s=", "iter=", "throughput=", "lr=", "acc", "=", "==", " ", "\t", "\u3000",
    "12", "3.5", "nan", "inf", "-inf", "21.5K", "1,024", "5e-04", "x", "[x]", "a.b=", "foo:", ",", ";", "é", "1a=",
    "_", ".", "step_time_s=", "mem_peak_gib="])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_CONTRACT_PIECES, st.text(max_size=4)), max_size=14).map("".join))
def test_the_contract_reader_reads_the_pairs_a_key_value_search_finds(body):
    """`_contract` reads a `[progress]` line token by token (its hot path): the sample is
    the one the plain reading gives -- every `key=value` a left-to-right regex search
    finds, aliases resolved, numbers as parse_number reads them, the step an int."""
    import re

    from controller.follow.logparse import _KEY_ALIASES, PROGRESS_FIELDS, parse_number
    from controller.records import ProgressSample

    values: dict = {}
    for key, text in re.findall(r"([A-Za-z_][\w.]*)=(\S+)", body):
        key = _KEY_ALIASES.get(key, key)
        if key not in PROGRESS_FIELDS:
            continue
        try:
            value: float | None = float(text)
        except ValueError:
            value = parse_number(text.rstrip(",;"))
        if value is None or (PROGRESS_FIELDS[key] is int and not math.isfinite(value)):
            continue
        values[key] = int(value) if PROGRESS_FIELDS[key] is int else value
    want = ProgressSample(source="log", **values) if "step" in values else None
    got = LineParser()._contract("[progress] " + body)
    assert repr(got) == repr(want)
