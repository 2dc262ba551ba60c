"""Generating: the KV-cached sampler and its grammar guard (`sampling`, `guard`), the sampler's options
(`sampling_options.SamplingOptions`, its defaults written there only), seeds cut from MIDI files (`seeds`),
continuing a seed (`continue_seed`), and continuing a file into an output folder (`generate_options`,
`output_folder`, `continue_midi.run`: the job behind ``musictx-generate``)."""
