"""Print the three-model comparison on pop (scripts/compare_pop.sh's results) as one Markdown table."""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "outputs" / "compare_pop"
KEYS = [("grid_share", "eighth grid"), ("lead_motif", "melody reuse"), ("motif_transposed", "top-line reuse"),
        ("verbatim_share", "verbatim >= 8"),
        ("pc_correlation", "PC corr."), ("density_ratio", "density"), ("duration_ratio", "duration"),
        ("held_at_cap", "held >= 4.9 s"), ("longest_loop", "longest loop"), ("tracks_kept", "tracks kept"),
        ("memorized", "memorized")]



def _fmt(value) -> str:
    """A figure, or "-" where the arm has none (a one-stream Performance model has no melody track)."""
    return "-" if value is None or value != value else f"{value:.3f}"


rows = []
for model in ("music_transformer", "transformer", "lstm", "performance"):
    if not (ROOT / model / "scorecard" / "metrics.json").exists():
        continue
    nll = json.loads((ROOT / model / "nll" / "metrics.json").read_text())
    card = json.loads((ROOT / model / "scorecard" / "metrics.json").read_text())["scorecard"]["means"]
    rows.append((model, nll, card))
print("| model (tokens) | params | NLL/token | NLL/note | " + " | ".join(label for _, label in KEYS) + " |")
print("|---" * (4 + len(KEYS)) + "|")
for model, nll, card in rows:
    figures = " | ".join(_fmt(card["model"].get(k)) for k, _ in KEYS)
    name = "music_transformer (Performance)" if model == "performance" else f"{model} (REMI)"
    print(f"| {name} | {nll['params']:,} | {nll['nll']['nll']:.3f} | {nll['nll']['nll_per_note']:.3f} | {figures} |")
real = rows[0][2]["real"]
print("| real continuation | | | | " + " | ".join(_fmt(real.get(k)) for k, _ in KEYS) + " |")
