"""Reading and writing music: MIDI files in and out (`midi_io`, `midi_timing`, `seed_tracks`), the event
tokenizer (no torch), the token store of a prepared dataset, WAV rendering, and always-valid JSON records."""
