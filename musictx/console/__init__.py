"""The commands' shared plumbing: the one-line errors and the checks before Hydra makes a run folder
(`guard`), and ``--help`` of every config key from the YAML (`config_help`). With `musictx.commands`, the
only package that imports Hydra or omegaconf; each command stays a thin file that parses its options and
calls one library `run`."""
