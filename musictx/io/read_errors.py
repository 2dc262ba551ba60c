"""What a MIDI reader's failure means, in a reader's words: the libraries' own messages are terse and name their
internals (symusic's MiniMidi: "Invaild midi file! File header is not MThd!: iostream error"). No torch."""

from __future__ import annotations

import re

# (what a reader says, what it means); text no entry matches is quoted as it came
_READ_ERRORS = (
    (r"File size is less than 14", "too short to be a MIDI file: a MIDI header alone takes 14 bytes"),
    (r"header is not MThd|Unknown file format", "not a MIDI file: it does not start with a MIDI header"),
    (r"first chunk length is not 6, but (\d+)", r"a damaged MIDI header: its length says \1 bytes, not 6"),
    (r"Invalid chunk length (\d+) \(remaining bytes after header: (\d+)\)",
     r"cut short or damaged: a chunk's length says \1 bytes where \2 remain"),
    (r"EOF while reading chunk header", "cut short: the file ends inside a chunk's header"),
    (r"Unexpected EOF", "cut short: the file ends inside an event"),
    (r"unsupported status byte: (0x[0-9a-f]+)", r"an illegal MIDI message, status byte \1"),
    (r"Unexpected running status", "a damaged event: a running status with no message before it"),
    (r"midi format \((\d+)\)", r"an unknown MIDI format, \1, where 0, 1 and 2 exist"),
    (r"Division type is not ticks per quarter", "timed in SMPTE frames, which is not read here: only ticks per beat"),
    (r"\bpitch=(\d+)", r"a note of pitch \1, where MIDI pitches are 0-127"),
)


def unreadable(err: Exception) -> str:
    """``unreadable MIDI (why)``: a reader's exception ``err`` in plain words (`_READ_ERRORS`)."""
    text = " ".join(str(err).split())
    for pattern, words in _READ_ERRORS:
        if found := re.search(pattern, text, re.IGNORECASE):
            return f"unreadable MIDI ({found.expand(words)})"
    return f"unreadable MIDI ({text or type(err).__name__})"
