"""The tasks: what a run does with its input file and the network (continue a seed, fill bars of a song,
accompany its melody). Each reads its input, builds the prompt, drives `musictx.decoding.generate` and
returns `Take`s. Above the engine (`musictx.decoding`), below the run (`musictx.generation`)."""
