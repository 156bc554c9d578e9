"""The coarse word filter every batch of log lines passes before a rule or reader reads
any of its lines: which lines hold one of a list of words, and which of a second list of
words the batch holds anywhere -- at a cost that grows with the words a batch holds, not
with the words it lacks.

Why: the filter runs on every line of every log (check-log's post-mortem read of 100 MB,
the watch's every tick), and a plain `word in text` per word costs one pass over the
text per word: 70 words were 70 passes over each healthy line, most of the read loop's
detector time. Here each word is first looked for once in the whole batch, in a *sieved*
copy of it -- lower-cased, UTF-8, without digits, ASCII punctuation and blanks, which is
about half of a metrics line's bytes -- and only the words found there are looked for in
each 16-line chunk's sieved copy, and exactly (`word in line.lower()`) in the lines of a
chunk that holds one. Deleting the same bytes from a word and from a text keeps every
occurrence of the word an occurrence of its sieved form, so a sieved miss is a true miss
and nothing is lost; a sieved hit (`error_rate` for "error", or "n1a" + "n" for "nan")
is only looked at exactly. The answer is what the plain test per line gives.

The first look is one pass for all the words (an Aho-Corasick automaton, pyahocorasick's C
one): a `word in text` per word cost one pass per word, and the list grew from 68 to 100
words in a day of new readers (the read loop got 1.16x slower with it); the automaton's
pass costs about what two `in` passes do, whatever the number of words.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import ahocorasick

CHUNK_LINES = 16
"""Lines tested together: one `in` over 16 joined lines costs about what one over a single
line does (the per-call overhead dominates a short line), and most chunks of a healthy log
hold no word at all."""

_SKIPPED_BYTES = (string.digits + string.punctuation + " \t\r\x0b\x0c").encode("ascii")
"""Bytes deleted from texts and words alike before the coarse passes: none of them tells
one word from another, and a metrics line is half made of them (`loss=3.1203 lr=5.9e-04`).
All ASCII, so a multi-byte character (`│`, `核`) is never cut; "\\n" stays, between lines."""


def _sieved(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass").translate(None, _SKIPPED_BYTES)


SEARCH_WINDOW_CHARS = 1 << 16
"""The automaton is handed a sieved slice this many characters at a time (each piece also
holding the next piece's first `longest word - 1` characters, so no word is cut): pyahocorasick
copies the text it searches into 4 bytes a character, which for a whole slice of non-Latin
text (3 MiB of sieved bytes) was 12 MiB more peak memory on test_hostile_logs' 100 MB log."""


class WordSieve:
    """Words to look for, each with its sieved form (lower-case words: the texts are
    lower-cased before any test)."""

    def __init__(self, words: Sequence[str]):
        self.words = tuple(words)
        self._pairs = tuple((w, _sieved(w)) for w in self.words)
        self._always = tuple(k for k, (_, sw) in enumerate(self._pairs) if not sw)
        """Words made only of skipped bytes: every text holds their (empty) sieved form."""
        self._automaton = ahocorasick.Automaton()
        for sw in {sw for _, sw in self._pairs if sw}:
            # Latin-1 maps each byte to the one character of the same number, so the
            # automaton's str search is a byte search; equal sieved forms share one key.
            self._automaton.add_word(sw.decode("latin-1"), sw)
        if len(self._automaton):
            self._automaton.make_automaton()
        self._longest = max((len(sw) for _, sw in self._pairs), default=1)

    def present(self, sieved_text: bytes) -> list[tuple[str, bytes]]:
        """The (word, sieved form) pairs whose sieved form `sieved_text` holds, in the
        words' order."""
        found: set[bytes] = set()
        if len(self._automaton):
            text = sieved_text.decode("latin-1")
            overlap = self._longest - 1
            for at in range(0, max(len(text) - overlap, 1), SEARCH_WINDOW_CHARS):
                piece = text[at:at + SEARCH_WINDOW_CHARS + overlap]
                found.update(sw for _, sw in self._automaton.iter(piece))
        return [p for k, p in enumerate(self._pairs) if p[1] in found or k in self._always]


SLICE_CHARS = 1 << 20
"""At most this many characters of a batch are sieved at once: the lower-cased and sieved
copies of a whole 8 MiB batch of non-Latin text (4 bytes a character in a str) added ~50 MiB
to check-log's peak on tests/reliability/test_hostile_logs.py's 100 MB log; a slice keeps
them to a few MiB and still looks for each word once per slice, not per line."""


def lines_with_words(texts: Sequence[str], line_words: WordSieve, batch_words: WordSieve, *,
                     slice_chars: int = SLICE_CHARS) -> tuple[list[int], set[str]]:
    """(indexes of the `texts` whose lower-cased text holds a word of `line_words`, in
    order; the words of `batch_words` that some lower-cased text holds)."""
    out: list[int] = []
    seen: set[str] = set()
    start = 0
    while start < len(texts):
        end, chars = start, 0
        while end < len(texts) and (end == start or chars < slice_chars):
            chars += sum(len(t) for t in texts[end:end + CHUNK_LINES])
            end += CHUNK_LINES
        _slice_lines_with_words(texts, start, min(end, len(texts)), line_words, batch_words, out, seen)
        start = end
    return out, seen


def _slice_lines_with_words(texts: Sequence[str], start: int, end: int, line_words: WordSieve,
                            batch_words: WordSieve, out: list[int], seen: set[str]) -> None:
    """lines_with_words over texts[start:end] (a whole number of chunks from `start`)."""
    chunks = [texts[g:min(g + CHUNK_LINES, end)] for g in range(start, end, CHUNK_LINES)]
    lows = ["\n".join(chunk).lower() for chunk in chunks]
    sieved = [_sieved(low) for low in lows]
    whole = b"\n".join(sieved)
    wanted, structure = line_words.present(whole), batch_words.present(whole)
    del whole
    if not wanted and not structure:
        return
    for c, chunk in enumerate(chunks):
        s = sieved[c]
        for w, sw in structure:
            if sw in s and w not in seen and w in lows[c]:
                seen.add(w)
        here = [w for w, sw in wanted if sw in s]
        if not here:
            continue
        for k, text in enumerate(chunk):
            low = text.lower()
            for w in here:
                if w in low:
                    out.append(start + c * CHUNK_LINES + k)
                    break
