"""Log text -> typed records: lines from raw bytes, progress samples, milestones, wandb ids.

Two jobs, both pure (no I/O):

- `split_lines` turns the bytes a probe read into complete, clean lines. A training log is
  hostile text: tqdm redraws with a lone `\\r`, a crashing process leaves invalid UTF-8 and
  NUL runs, rich/click/wandb colour everything with ANSI escapes, and a runaway print can
  write 100 MB with no newline. Lines come out decoded, without NULs or escapes (they are
  what we match and what we show as evidence), and never longer than a cap, so memory
  stays bounded whatever the file holds. The carry it hands back is the raw unconsumed
  tail, so `bytes consumed = bytes read - len(carry)` is always true (the cursor relies
  on it) and any chunking of the same bytes yields the same lines.
- `LineParser` recognises what one line says: the bundled trainer's documented contract
  (`[progress] k=v …`, `[milestone] name k=v`, README), a user's own regex
  (`watch.progress_pattern`), common other trainers' progress lines, and every way wandb
  announces a run (online, offline, self-hosted).
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from controller.errors import BadInputError
from controller.follow.progress_pairs import read_pairs
from controller.records import ProgressSample, WandbInfo

# ---------------------------------------------------------------------------------------
# Lines
# ---------------------------------------------------------------------------------------

LINE_CAP_BYTES = 64 * 1024
"""Longest line kept whole; a longer one is cut into pieces of at most this many bytes."""

CUT_MARK = " …[line cut: longer than 64 KiB]"

# CSI (colours, cursor moves), OSC (titles, hyperlinks; BEL or ST terminated), and the
# two-byte escapes. Applied after decoding, so it works on str.
_ANSI_RE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"          # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL | ST
    r"|\x1b[@-Z\\-_]"                   # 2-byte Fe escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"           # 8-bit CSI
)


class LogLine(str):
    """A decoded, cleaned log line. `cut` is True when the original line was longer than
    LINE_CAP_BYTES and this is one capped piece of it (the text ends with CUT_MARK)."""

    cut: bool = False

    def __new__(cls, text: str, cut: bool = False) -> "LogLine":
        obj = super().__new__(cls, text)
        if cut:  # (an uncut line reads the class's False: no instance dict for each of a log's lines)
            obj.cut = cut
        return obj


def clean_text(text: str) -> str:
    """Strip ANSI escapes and NULs: what a person would have seen on a terminal."""
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI_RE.sub("", text)
    if "\x00" in text:
        text = text.replace("\x00", "")
    return text


def _decode(raw: bytes, cut: bool) -> LogLine:
    text = clean_text(raw.decode("utf-8", "replace"))
    return LogLine(text + CUT_MARK if cut else text, cut=cut)


def _utf8_cut_point(raw: bytes, cap: int) -> int:
    """A cut at `cap` bytes, moved back (at most 3 bytes) so no UTF-8 character is split."""
    cut = cap
    for _ in range(3):
        if cut > 0 and (raw[cut] & 0xC0) == 0x80:  # raw[cut] is a continuation byte
            cut -= 1
        else:
            break
    return cut if cut > 0 else cap


def _pieces(content: bytes, out: list[str], cap: int, final: bool) -> bytes:
    """Emit cap-sized pieces of an over-long line; return what is left (<= cap bytes).

    With final=True the rest is emitted too (the line is complete)."""
    while len(content) > cap:
        cut = _utf8_cut_point(content, cap)
        out.append(_decode(content[:cut], cut=True))
        content = content[cut:]
    if final:
        out.append(_decode(content, cut=False))
        return b""
    return content


def split_lines(buf: bytes, carry: bytes = b"", cap: int = LINE_CAP_BYTES) -> tuple[list[str], bytes]:
    """Split `carry + buf` into complete lines; return (lines, new carry).

    Line ends: `\\n`, `\\r\\n` and a lone `\\r` (tqdm). A trailing `\\r` stays in the carry
    because the next chunk may start with `\\n`. Lines are decoded with replacement, and
    NUL bytes and ANSI escapes are removed. A line longer than `cap` bytes comes out in
    pieces of at most `cap` bytes, each flagged `cut` and ending in CUT_MARK, so neither
    the lines nor the carry ever grow past `cap` (+1 byte for a pending `\\r`).
    The same bytes give the same lines however they are chunked.
    """
    data = carry + buf if carry else buf
    if not data:
        return [], b""
    out: list[str] = []
    parts = data.splitlines(keepends=True)
    last = parts[-1]
    if last.endswith(b"\n"):
        tail = b""
    else:
        # Unterminated, or ends in a lone \r that might be the first half of \r\n.
        tail = last
        parts.pop()
    for part in parts:
        if part.endswith(b"\r\n"):
            content = part[:-2]
        else:
            content = part[:-1]
        if len(content) <= cap:
            out.append(_decode(content, cut=False))
        else:
            _pieces(content, out, cap, final=True)
    if tail:
        pending_cr = tail.endswith(b"\r")
        content = tail[:-1] if pending_cr else tail
        if len(content) > cap:
            content = _pieces(content, out, cap, final=False)
        tail = content + (b"\r" if pending_cr else b"")
    return out, tail


def flush_carry(carry: bytes, cap: int = LINE_CAP_BYTES) -> list[str]:
    """At end of file (post-mortem reading), the carry is a last line without a newline."""
    if not carry:
        return []
    content = carry[:-1] if carry.endswith(b"\r") else carry
    out: list[str] = []
    _pieces(content, out, cap, final=True)
    return out


# ---------------------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------------------

_SUFFIX = {"k": 1e3, "m": 1e6, "g": 1e9, "b": 1e9}
_NUM_RE = re.compile(r"^([-+]?(?:\d[\d,_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([kKmMgGbB])?$")


def parse_number(text: str) -> float | None:
    """'21.5K' -> 21500.0, '10,050' -> 10050.0, '1.0E-04', 'nan', 'inf'; garbage -> None."""
    try:
        return float(text)  # the common case: a plain number (also nan/inf)
    except ValueError:
        pass
    t = text.strip().rstrip("%")
    low = t.lower()
    if low in ("nan", "+nan", "-nan"):
        return math.nan
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    if low in ("-inf", "-infinity"):
        return -math.inf
    m = _NUM_RE.match(t)
    if not m:
        return None
    try:
        value = float(m.group(1).replace(",", "").replace("_", ""))
    except ValueError:
        return None
    if m.group(2):
        value *= _SUFFIX[m.group(2).lower()]
    return value


# ---------------------------------------------------------------------------------------
# Parsed records
# ---------------------------------------------------------------------------------------

@dataclass
class ParsedLine:
    """What one log line said (each part None when the line did not say it)."""

    progress: ProgressSample | None = None
    milestone: tuple[str, dict[str, str]] | None = None
    wandb: WandbInfo | None = None


PROGRESS_FIELDS: dict[str, type] = {
    f.name: (int if f.name == "step" else float)
    for f in dataclasses.fields(ProgressSample)
    if f.name not in ("source", "time_s")
}
PROGRESS_FIELDS["time_s"] = float

# A number as trainers print it (tqdm's rate); a K/M suffix only when no letter follows.
_NUMTOK = r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:[KkMm](?![A-Za-z]))?|nan|NaN|inf|Inf"
_KV_RE = re.compile(r"([A-Za-z_][\w.]*)=(\S+)")
# The contract's key=value lines: aliases other trainers use for its keys.
_KEY_ALIASES = {
    "tok_s": "tok_per_s", "tokens_per_s": "tok_per_s", "tokens_per_sec": "tok_per_s",
    "tok_per_sec": "tok_per_s", "tps": "tok_per_s", "throughput": "tok_per_s",
    "tokens_per_second": "tok_per_s",
    "samples_per_sec": "samples_per_s", "samples_per_second": "samples_per_s",
    "learning_rate": "lr", "iter": "step", "iteration": "step", "global_step": "step",
    "step_time": "step_time_s", "iter_time_s": "step_time_s",
}
_CONTRACT_KEYS: dict[str, str] = {
    key: _KEY_ALIASES.get(key, key) for key in (*PROGRESS_FIELDS, *_KEY_ALIASES) if _KEY_ALIASES.get(key, key) in PROGRESS_FIELDS}
"""A contract line's key -> the ProgressSample field it fills (aliases resolved), in one look-up."""
_INT_FIELDS = frozenset(name for name, kind in PROGRESS_FIELDS.items() if kind is int)
# tqdm: "desc:  45%|████▌     | 450/1000 [01:23<01:42,  5.38it/s, loss=2.31]", and with no
# total (an iterable without len): "Epoch 8: : 150it [00:03, 46.84it/s, loss=1.625, v_num=0]"
_TQDM_RE = re.compile(
    r"^(?P<desc>.*?)\s*(?:\d{1,3}%\|[^|]*\|\s*(?P<n>\d+)/(?P<total>\d+|\?)|(?P<n_only>\d+)it)\s*\[[^\]]*?"
    r"(?:,\s*(?P<rate>" + _NUMTOK + r")\s*(?P<unit>it/s|s/it))?(?P<post>,[^\]]*)?\]")
_TQDM_UNSIZED_RE = re.compile(r"\d+it \[")
_TQDM_TRAINING_DESC = re.compile(r"train|epoch|step|iter|^[\s:]*$", re.I)
# HF Trainer: {'loss': 2.1, 'grad_norm': 1.3, 'learning_rate': 5e-05, 'epoch': 0.5}; fairseq's
# JSON lines quote their numbers: {"loss": "8.206", "num_updates": "33700", ...}
_HF_ITEM_RE = re.compile(r"['\"](\w+)['\"]\s*:\s*['\"]?(" + _NUMTOK + r")['\"]?\s*[,}]")
_DICT_STEP_KEYS = ("step", "global_step", "num_updates")
_DICT_TOK_KEYS = ("tok_per_s", "tokens_per_second", "train_tokens_per_second", "tokens_per_second_per_gpu", "wps")
_SAMPLE_FIELDS = ("loss", "eval_loss", "tok_per_s", "step_time_s", "samples_per_s")
"""A free-form line is progress when it names a step and at least one of these."""


def _num_or_none(text: str | None) -> float | None:
    return parse_number(text) if text else None


# ---------------------------------------------------------------------------------------
# wandb
# ---------------------------------------------------------------------------------------

_WANDB_RUN_URL_RE = re.compile(r"(https?://[^\s'\"<>]+?/runs/([A-Za-z0-9_.-]+))(?=[/?#\s'\"<>)]|$)")
_WANDB_OFFLINE_DIR_RE = re.compile(r"(\S*offline-run-\d{8}_\d{6}-([A-Za-z0-9_-]+))")
_WANDB_ONLINE_DIR_RE = re.compile(r"(\S*(?<![\w-])run-\d{8}_\d{6}-([A-Za-z0-9_-]+))")


def parse_wandb(line: str) -> WandbInfo | None:
    """The run id / URL / mode in any line wandb prints about a run (None for other lines).

    wandb 0.31 (wandb_run.py header/footer): `Tracking run with wandb version X`,
    `Run data is saved locally in <dir>` (run-<ts>-<id> online, offline-run-<ts>-<id>
    offline), `W&B syncing is set to `offline``, `Syncing run <name>` / `Resuming run`,
    `🚀 View run at <url>`, `🚀 View run <name> at: <url>`, `wandb sync <dir>`; older
    versions `Synced <name>: <url>`. URLs may be on a self-hosted WANDB_BASE_URL host.
    """
    low = line.lower()
    if "wandb" not in low and "w&b" not in low and "/runs/" not in line:
        return None
    if "/runs/" in line and ("wandb" in low or "view run" in low or "synced" in low):
        m = _WANDB_RUN_URL_RE.search(line)
        if m and "/runs/" in m.group(1):
            return WandbInfo(run_id=m.group(2), url=m.group(1), mode="online")
    if "offline-run-" in line:
        m = _WANDB_OFFLINE_DIR_RE.search(line)
        if m:
            return WandbInfo(run_id=m.group(2), mode="offline", offline_dir=m.group(1).strip("`'\"").rstrip(".,;:"))
    if "wandb" not in low and "w&b" not in low:
        return None
    if "saved locally in" in low or "find logs at" in low:
        m = _WANDB_ONLINE_DIR_RE.search(line)
        if m:
            return WandbInfo(run_id=m.group(2), mode="online")
    if "syncing is set to" in low and "offline" in low:
        return WandbInfo(mode="offline")
    if re.search(r"\b(?:syncing|resuming) run\b", low) or "to turn off syncing" in low:
        return WandbInfo(mode="online")
    if "tracking run with wandb version" in low:
        return WandbInfo()
    return None


def merge_wandb(old: WandbInfo | None, new: WandbInfo | None) -> WandbInfo | None:
    """Fold a newly parsed WandbInfo into what is known. A different run id means a new
    run was started in the same log: the new one replaces the old."""
    if new is None:
        return old
    if old is None:
        return dataclasses.replace(new)
    if new.run_id and old.run_id and new.run_id != old.run_id:
        return dataclasses.replace(new)
    merged = dataclasses.replace(old)
    for f in ("run_id", "url", "state"):
        value = getattr(new, f)
        if value is not None:
            setattr(merged, f, value)
    # `Find logs at: wandb/offline-run-…/logs` is relative to the run's cwd: keep the
    # absolute `saved locally in` / `wandb sync` path seen earlier.
    if new.offline_dir and (merged.offline_dir is None or new.offline_dir.startswith("/")):
        merged.offline_dir = new.offline_dir
    if new.mode != "unknown":
        # An offline dir / sync hint is definitive; a URL means online.
        if not (merged.mode == "offline" and new.mode == "online" and new.url is None):
            merged.mode = new.mode
    if merged.url and merged.mode != "offline":
        merged.mode = "online"
    return merged


# ---------------------------------------------------------------------------------------
# The line parser
# ---------------------------------------------------------------------------------------

class LineParser:
    """Recognise progress, milestones and wandb ids in one log line at a time.

    `progress_pattern` (WatchConfig.progress_pattern): a regex with named groups named
    like ProgressSample fields (step, tok_per_s, loss, step_time_s, ...); numbers may
    carry K/M suffixes and thousands commas. It is tried first. A sample without a step
    (HF Trainer dicts, a pattern without `step`) gets the parser's running count of
    samples it has produced, so steps stay increasing.
    """

    def __init__(self, progress_pattern: str | None = None):
        self._custom: re.Pattern[str] | None = None
        if progress_pattern:
            try:
                rx = re.compile(progress_pattern)
            except re.error as exc:
                raise BadInputError(f"progress pattern {progress_pattern!r}: not a valid regex: {exc}") from None
            unknown = sorted(set(rx.groupindex) - set(PROGRESS_FIELDS))
            if not rx.groupindex:
                raise BadInputError(
                    f"progress pattern {progress_pattern!r}: has no named groups; name them like "
                    f"(?P<step>\\d+) and (?P<tok_per_s>[\\d.]+[KM]?)")
            if unknown:
                raise BadInputError(
                    f"progress pattern {progress_pattern!r}: group(s) {', '.join(unknown)} are not progress "
                    f"fields; use: {', '.join(sorted(PROGRESS_FIELDS))}")
            self._custom = rx
        self._count = 0

    # -- public ---------------------------------------------------------------------------
    def parse(self, line: str) -> ParsedLine:
        out = ParsedLine()
        if not line:
            return out
        progress = self._progress(line)
        if progress is not None:
            self._count = max(self._count + 1, progress.step)
            out.progress = progress
            return out
        if "[milestone]" in line:
            out.milestone = self._milestone(line)
            if out.milestone:
                return out
        out.wandb = parse_wandb(line)
        return out

    # -- progress -------------------------------------------------------------------------
    def _progress(self, line: str) -> ProgressSample | None:
        if self._custom is not None:
            m = self._custom.search(line)
            if m:
                return self._from_fields(m.groupdict())
        if "[progress]" in line:
            return self._contract(line)
        if "'loss'" in line or '"loss"' in line:
            brace = line.find("{")
            if brace >= 0:
                return self._hf_dict(line[brace:])
        if "%|" in line or _TQDM_UNSIZED_RE.search(line):
            return self._tqdm(line)
        return self._generic(line)

    def _from_fields(self, fields: dict[str, str | None]) -> ProgressSample | None:
        values: dict[str, float | int] = {}
        for name, text in fields.items():
            if text is None:
                continue
            value = parse_number(text)
            if value is None:
                continue
            if PROGRESS_FIELDS.get(name) is int:
                if not math.isfinite(value):
                    continue
                value = int(value)
            values[name] = value
        if not values:
            return None
        if "step" not in values:
            values["step"] = self._count + 1
        return ProgressSample(source="log", **values)  # type: ignore[arg-type]

    def _contract(self, line: str) -> ProgressSample | None:
        """README: `[progress] step=120 loss=3.2145 ... tok_per_s=21534.2 ...`."""
        # The hot path of a long post-mortem scan: a pair is read from its whitespace-free
        # token (`_KV_RE`'s pairs hold no blank, and a token that begins with a known key
        # and `=` is that pair), the regex only for a token that does not; plain float() first.
        tail = line.split("[progress]", 1)[1]
        values: dict[str, float | int] = {}
        for token in tail.split():
            key, _, text = token.partition("=")
            name = _CONTRACT_KEYS.get(key)
            if name is None or not text:
                m = _KV_RE.search(token)
                if m is None:
                    continue
                key, text = m.groups()
                name = _CONTRACT_KEYS.get(key)
                if name is None:
                    continue
            value: float | None
            try:
                value = float(text)
            except ValueError:
                # `lr=9.8e-04[rank1]:[dist] ...`: torchrun --tee copies each rank's writes as
                # they come, and print() writes a line's text and its newline apart, so another
                # rank's prefixed line can land before this one's newline (seen in
                # tests/test_job_local.py's run on a loaded machine): the value ends at the `[`.
                value = parse_number(text.split("[", 1)[0].rstrip(",;"))
                if value is None:
                    continue
            if name in _INT_FIELDS:
                if not math.isfinite(value):
                    continue
                value = int(value)
            values[name] = value
        if "step" not in values:
            return None
        return ProgressSample(source="log", **values)  # type: ignore[arg-type]

    def _hf_dict(self, line: str) -> ProgressSample | None:
        items = dict(_HF_ITEM_RE.findall(line))
        if "loss" not in items:
            return None
        fields = {"loss": items.get("loss"), "lr": items.get("learning_rate", items.get("lr"))}
        for key in _DICT_TOK_KEYS:
            if key in items:
                fields["tok_per_s"] = items[key]
                break
        for key in _DICT_STEP_KEYS:
            if key in items:
                fields["step"] = items[key]
        return self._from_fields(fields)

    def _tqdm(self, line: str) -> ProgressSample | None:
        m = _TQDM_RE.search(line)
        if not m or not _TQDM_TRAINING_DESC.search(m.group("desc") or ""):
            return None
        fields: dict[str, str | None] = {"step": m.group("n") or m.group("n_only")}
        rate = _num_or_none(m.group("rate"))
        if rate and math.isfinite(rate) and rate > 0:
            fields["step_time_s"] = repr(1.0 / rate if m.group("unit") == "it/s" else rate)
        # the postfix is key=value pairs of the trainer's own choosing (Lightning's loss,
        # NeMo's tps=, reduced_train_loss=): read by pairing; the bar's count and rate win
        post = read_pairs((m.group("post") or "").lstrip(","))
        for key in ("loss", "tok_per_s", "samples_per_s", "lr"):
            if key in post:
                fields[key] = repr(post[key])
        if len(fields) == 1:
            return None
        return self._from_fields(fields)

    def _generic(self, line: str) -> ProgressSample | None:
        """Any other line that names a step: read by pairing each number with the word
        that names it (controller/follow/progress_pairs.py), so `step 65 loss 1.4292 tok/s 6020`
        gives tok/s 6020, not the loss. Progress only with a step and a figure."""
        low = line.lower()
        if "step" not in low and "iter" not in low and "num_updates" not in low:
            return None
        pairs = read_pairs(line)
        if "step" not in pairs or not any(k in pairs for k in _SAMPLE_FIELDS):
            return None
        values: dict[str, float | int] = {k: v for k, v in pairs.items() if k in PROGRESS_FIELDS}
        values["step"] = int(pairs["step"])
        return ProgressSample(source="log", **values)  # type: ignore[arg-type]

    # -- milestones -----------------------------------------------------------------------
    @staticmethod
    def _milestone(line: str) -> tuple[str, dict[str, str]] | None:
        """README: `[milestone] dataset_loaded samples=1095082`."""
        tail = line.split("[milestone]", 1)[1].strip()
        if not tail:
            return None
        name, _, rest = tail.partition(" ")
        if "=" in name:
            return None
        return name, dict(_KV_RE.findall(rest))
