"""The console scripts: each parses its Hydra config into options and calls one library function."""
