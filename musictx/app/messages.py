"""Why an uploaded file cannot be read, in the app's words: the MIDI libraries' own messages (exception
class names, a third party's "Invaild") mean nothing to the person who uploaded the file."""

from __future__ import annotations

import re
from pathlib import Path

DAMAGED = "a damaged MIDI file: it starts like one, but what follows cannot be read (cut short or corrupted)"
HEADER = b"MThd"  # every standard MIDI file starts with this chunk: 14 bytes with its length and fields
AUDIO_MAGIC = (b"RIFF", b"ID3", b"OggS", b"fLaC", b"\xff\xfb", b"\xff\xf3", b"FORM")


def header_problem(path: Path) -> str | None:
    """Why ``path`` is not a MIDI file at all, judged from its first bytes, or None."""
    with open(path, "rb") as f:
        head = f.read(14)
    if head.startswith(HEADER):
        return None if len(head) >= 14 else f"cut short: {len(head)} bytes, less than a MIDI file's 14-byte header"
    if head.startswith(AUDIO_MAGIC):
        return "an audio file, not a MIDI file; the app continues MIDI files (.mid/.midi)"
    return "not a MIDI file (it does not start with a MIDI header)"


def reason_for_page(reason: str) -> str:
    """A reader's failure (`musictx.midi_io.MidiReadError`'s reason, or a message ending in one) in the app's
    words. `header_problem` has already turned away files that are not MIDI at all, so what the libraries
    still fail on is a file that starts as MIDI and breaks later."""
    return re.sub(r"unreadable MIDI \(.*\)$", DAMAGED, reason)
