"""Evaluating: likelihood of a split, continuation statistics and their health checks, motif forgetting
curves, recall (copy gain, context length), the comparison report, attention arcs and plots (`run` is the job
behind ``musictx-evaluate``)."""
