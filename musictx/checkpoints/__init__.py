"""Saved models: the one place that reads a checkpoint or a model folder (`model_store`) and writes a model
folder from a checkpoint (`export`)."""
