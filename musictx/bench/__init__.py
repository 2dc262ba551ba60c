"""Benchmarks that print tables: ``python -m musictx.bench {prep,attention,train,generate}``."""
