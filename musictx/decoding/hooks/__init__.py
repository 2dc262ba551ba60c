"""The sampler's hooks, one file each with the `HookSpec` that describes it; ``registry`` lists them and builds
a run's hooks. The kinds they come in are in `musictx.decoding.hook`."""
