"""Benchmarks that print tables: ``python -m bench {prep,attention,train,generate}``."""
