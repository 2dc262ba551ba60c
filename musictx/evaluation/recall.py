"""Does a model use what it has heard? Three measurements of in-context recall on a prepared split.

- **Copy probe.** A passage S (``passage`` tokens) is heard, then ``gap`` tokens of other music F, then S
  again: ``[S, F, S]``. The control replaces the first S by unrelated music U of the same length:
  ``[U, F, S]``. The *copy gain* is the control's NLL minus the repeat's, on the second S's tokens from
  ``skip`` on (the first few tokens of a repeat cannot be known to be one). A model that recalls predicts
  the repeat almost perfectly (gain of several nats); one that ignores its context gains ~0. With
  ``transpose`` the second S is moved by that many semitones in both sequences (a motif in a new key).
  S, F and U come from three different pieces, so no gain comes from the piece's style.
- **In-window repeats.** On ordinary windows, the NLL of tokens that close an ``ngram`` already heard
  earlier in the same window (a literal repeat a copier could predict) against all other tokens.
- **Context length.** The NLL of the same targets (the last ``targets`` tokens of stretches) with
  ``contexts`` tokens before them: does more context help, up to 2x the trained one?

Models only see token ids (numpy in, torch forward, floats out); `RecallProbe` in `musictx.training.callbacks`
logs the copy gain at every validation, so a run's curves show when recall appears.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from musictx.decoding import eval_mode
from musictx.io.token_edits import transpose_ids
from musictx.io.token_store import TokenArrays
from musictx.io.tokenizer import EventTokenizer


@dataclass(frozen=True)
class Probe:
    """One copy-probe triple: the passage S, the filler F (at least the largest gap) and the control U."""

    passage: np.ndarray
    filler: np.ndarray
    unrelated: np.ndarray


def draw_probes(arrays: TokenArrays, n: int, passage: int, filler: int, seed: int = 0) -> list[Probe]:
    """``n`` probes with S, F and U from three different pieces of ``arrays`` (pieces reused if needed).

    Raises ValueError when the split has fewer than 3 pieces long enough for a passage."""
    rng = np.random.default_rng(seed)
    long_enough = np.flatnonzero(arrays.lengths > passage + 1)
    if len(long_enough) < 3:
        raise ValueError(f"{arrays.dir}/{arrays.split}: the copy probe needs 3 pieces of more than {passage + 1} "
                         f"tokens, found {len(long_enough)}")
    probes = []
    for _ in range(n):
        s_piece, u_piece, f_piece = rng.choice(long_enough, 3, replace=False)
        probes.append(Probe(_slice(arrays, s_piece, passage, rng), _filler(arrays, f_piece, filler, rng),
                            _slice(arrays, u_piece, passage, rng)))
    return probes


def _slice(arrays: TokenArrays, piece: int, n: int, rng: np.random.Generator) -> np.ndarray:
    ids = arrays.piece(int(piece))[:-1]  # without EOS
    start = int(rng.integers(0, max(len(ids) - n, 0) + 1))
    return np.asarray(ids[start:start + n], dtype=np.int64)


def _filler(arrays: TokenArrays, piece: int, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` tokens of music from ``piece`` on, continuing into the next pieces when it is shorter."""
    if n <= 0:  # recall.gaps=[0]: the repeat follows its passage at once, no filler at all
        return np.zeros(0, dtype=np.int64)
    parts, have, i = [], 0, int(piece)
    while have < n:
        part = np.asarray(arrays.piece(i % len(arrays))[:-1], dtype=np.int64)
        parts.append(part if have else part[int(rng.integers(0, max(len(part) - n, 0) + 1)):])
        have += len(parts[-1])
        i += 1
    return np.concatenate(parts)[:n]


@torch.no_grad()
def token_nll(net, ids: np.ndarray, device="cpu") -> np.ndarray:
    """Per-target NLL (n - 1,) of a whole id sequence in one forward: entry t scores ids[t + 1]; the net in eval
    mode (`eval_mode`: a net left training scored with dropout on)."""
    x = torch.as_tensor(ids[None, :-1], dtype=torch.long, device=device)  # (1, T)
    with eval_mode(net):
        logits = net(x).float()  # (1, T, V)
    y = torch.as_tensor(ids[None, 1:], dtype=torch.long, device=device)
    return F.cross_entropy(logits.transpose(1, 2), y, reduction="none")[0].cpu().numpy()


def event_names(tok: EventTokenizer) -> np.ndarray:
    """(V,) the event family of each id, in the tokenizer's own vocabulary: a metrical (REMI) one's token types
    (Pitch, Duration, Position, Bar, Program, ...), a Performance one's event names without their value
    (note_on, note_off, time_shift, velocity, pedal_down, ...). REMI's were once filed under Performance names
    (Pitch as note_on, Duration as note_off), and its Program, TimeSig and Tempo tokens under none."""
    if tok.kind != "performance":
        return np.asarray(tok.type_of)
    names = [tok.id_to_token(i) for i in range(tok.vocab_size)]
    return np.array([n.rsplit("_", 1)[0].lower() if n.rsplit("_", 1)[-1].isdigit() else n.lower() for n in names])


def moved(ids: np.ndarray, semitones: int, tok) -> np.ndarray:
    """``ids`` transposed by ``semitones``, in the tokenizer's own terms (a metrical one moves its Pitch ids)."""
    return transpose_ids(ids, semitones, tok) if tok.kind == "performance" else tok.transpose_ids(ids, semitones)


def copy_gain(net, tok: EventTokenizer, probes: list[Probe], gap: int, skip: int = 16, transpose: int = 0,
              device="cpu") -> dict:
    """Mean NLL of the repeated passage's tokens ``skip``.. after ``[S, F_gap, S']`` and ``[U, F_gap, S']``,
    overall and by event family (``by_event``: is it the pitches that are recalled, or the timing and
    dynamics too? A continuation that keeps a motif's notes but not its pulse recalls only the first)."""
    names = event_names(tok)
    repeat, control, family = [], [], []
    for p in probes:
        second = moved(p.passage, transpose, tok) if transpose else p.passage
        tail = np.concatenate([p.filler[:gap], second])
        family.append(names[second[skip:]])
        for first, out in ((p.passage, repeat), (p.unrelated, control)):
            nll = token_nll(net, np.concatenate([first, tail]), device)
            out.append(nll[-(len(second) - skip):])  # the targets second[skip:]
    repeat, control, family = np.concatenate(repeat), np.concatenate(control), np.concatenate(family)
    by_event = {}
    for name in dict.fromkeys(names):  # every family the targets hold, in the vocabulary's order
        if (kept := family == name).any():
            rep, ctl = float(repeat[kept].mean()), float(control[kept].mean())
            by_event[str(name)] = {"tokens": int(kept.sum()), "nll_repeat": rep, "nll_control": ctl, "gain": ctl - rep}
    return {"gap": gap, "transpose": transpose, "nll_repeat": float(repeat.mean()),
            "nll_control": float(control.mean()), "gain": float(control.mean() - repeat.mean()),
            "by_event": by_event}


def repeated_positions(ids: np.ndarray, ngram: int) -> np.ndarray:
    """Bool (len(ids),): True at t when ids[t - ngram + 1 .. t] already occurred, ending before t."""
    seen: set[bytes] = set()
    out = np.zeros(len(ids), dtype=bool)
    for t in range(ngram - 1, len(ids)):
        key = ids[t - ngram + 1:t + 1].tobytes()
        out[t] = key in seen
        seen.add(key)
    return out


def in_window_repeats(net, arrays: TokenArrays, context: int, n_windows: int, ngram: int = 16,
                      pad_id: int | None = None, seed: int = 0, device="cpu") -> dict:
    """NLL of targets that close an already-heard ``ngram`` in their window, against the other targets."""
    rng = np.random.default_rng(seed)
    long_enough = np.flatnonzero(arrays.lengths > context + 1)
    rep, other = [], []
    for _ in range(n_windows if len(long_enough) else 0):
        ids = _slice(arrays, rng.choice(long_enough), context + 1, rng)
        nll = token_nll(net, ids, device)
        mask = repeated_positions(ids, ngram)[1:]  # aligned with the targets ids[1:]
        rep.append(nll[mask])
        other.append(nll[~mask])
    rep_all = np.concatenate(rep) if rep else np.zeros(0)
    other_all = np.concatenate(other) if other else np.zeros(0)
    return {"ngram": ngram, "context": context, "windows": len(rep), "repeat_tokens": int(rep_all.size),
            "other_tokens": int(other_all.size),
            "nll_repeat": float(rep_all.mean()) if rep_all.size else None,
            "nll_other": float(other_all.mean()) if other_all.size else None}


def context_ceiling(net) -> int | None:
    """The longest input a model can take: absolute positions end at max_seq_len; relative attention and
    the LSTM have no such end (the Music Transformer's max_seq_len is only a cache size)."""
    return getattr(net, "max_seq_len", None) if hasattr(net, "pos_emb") else None


def nll_vs_context(net, arrays: TokenArrays, contexts: list[int], targets: int, n_stretches: int, seed: int = 0,
                   device="cpu") -> list[dict]:
    """NLL of the same ``targets`` tokens (the end of each stretch) with each of ``contexts`` tokens before."""
    ceiling = context_ceiling(net)
    contexts = sorted(c for c in contexts if ceiling is None or c + targets <= ceiling)
    # a context no piece is long enough for is left out (`contexts_left_out` says why); it had emptied every row
    contexts = [c for c in contexts if len(arrays) and int(arrays.lengths.max()) > c + targets + 1]
    if not contexts:
        return []
    longest = contexts[-1] + targets + 1
    rng = np.random.default_rng(seed)
    pieces = np.flatnonzero(arrays.lengths > longest)
    stretches = [_slice(arrays, rng.choice(pieces), longest, rng) for _ in range(n_stretches if len(pieces) else 0)]
    saved = getattr(net, "max_seq_len", None)
    rows = []
    try:
        if saved is not None and ceiling is None:
            net.max_seq_len = max(saved, longest)  # relative attention: the limit is a cache size only
        for c in contexts:
            nll = [token_nll(net, s[-(c + targets + 1):], device)[-targets:] for s in stretches]
            rows.append({"context": c, "targets": targets * len(stretches),
                         "nll": float(np.concatenate(nll).mean()) if nll else None})
    finally:
        if saved is not None:
            net.max_seq_len = saved
    return rows


# ----- the whole measurement (musictx-evaluate mode=recall) ------------------------------------------------
# The keys of conf/evaluate.yaml's `recall:` block; their defaults are written in the YAML only.
KEYS = ("gaps", "num_probes", "passage", "skip", "transpose", "ngram", "repeat_windows", "contexts", "targets",
        "num_stretches", "seed")


def evaluate_recall(net, tok: EventTokenizer, arrays: TokenArrays, cfg, context: int, device="cpu",
                    progress=print) -> dict:
    """Copy gain vs gap (exact and transposed), in-window repeats and NLL vs context of ``net`` on ``arrays``.

    ``cfg``: the ``recall:`` block of conf/evaluate.yaml as a dict, every key of `KEYS` given (e.g.
    ``musictx.evaluation.run.evaluation_options(recall={...}).recall``); ``context``: the model's trained
    context, which bounds the probes' length (gaps that do not fit are left out)."""
    missing = [key for key in KEYS if key not in cfg]
    if missing:
        raise ValueError(f"recall: no {', '.join(missing)}; evaluate.yaml's recall block has every key")
    s = dict(cfg)
    passage, skip = int(s["passage"]), int(s["skip"])
    gaps = [int(g) for g in s["gaps"] if 2 * passage + g <= context + 1]  # probes inside the trained context
    gaps_left_out = [int(g) for g in s["gaps"] if int(g) not in gaps]
    if not gaps:
        raise ValueError(f"recall: no gap of recall.gaps={list(s['gaps'])} fits a passage of {passage} ids twice in "
                         f"the model's context of {context}: lower recall.passage (at most {(context + 1) // 2})")
    if gaps_left_out:
        progress(f"copy probe: gaps {gaps_left_out} left out: {passage} ids twice with them pass the context {context}")
    probes = draw_probes(arrays, int(s["num_probes"]), passage, max(gaps, default=0), int(s["seed"]))
    copies = {}
    for step in sorted({0, int(s["transpose"])}):
        progress(f"copy probe{f' (transposed {step:+d})' if step else ''}: gaps {gaps}")
        copies["exact" if step == 0 else "transposed"] = [
            copy_gain(net, tok, probes, g, skip, step, device) for g in gaps]
    progress(f"in-window repeats: {s['repeat_windows']} windows of {context} tokens")
    repeats = in_window_repeats(net, arrays, context, int(s["repeat_windows"]), int(s["ngram"]), seed=int(s["seed"]),
                                device=device)
    progress(f"NLL vs context: {list(s['contexts'])}")
    by_context = nll_vs_context(net, arrays, [int(c) for c in s["contexts"]], int(s["targets"]),
                                int(s["num_stretches"]), int(s["seed"]), device)
    return {"settings": {k: s[k] for k in KEYS}, "trained_context": context, "copy": copies,
            "gaps_left_out": gaps_left_out, "repeats": repeats, "context": by_context,
            "contexts_left_out": contexts_left_out(net, arrays, s["contexts"], int(s["targets"]), by_context)}


def contexts_left_out(net, arrays: TokenArrays, asked: list, targets: int, rows: list[dict]) -> dict[str, str]:
    """Each context of ``asked`` that `nll_vs_context` could not measure, with why (said in the table, where
    such a row had only gone missing)."""
    measured = {r["context"] for r in rows if r["nll"] is not None}
    ceiling, longest = context_ceiling(net), int(arrays.lengths.max()) if len(arrays) else 0
    out = {}
    for c in sorted({int(c) for c in asked} - measured):
        if ceiling is not None and c + targets > ceiling:
            out[str(c)] = f"with its {targets} targets it passes the model's {ceiling} positions"
        else:
            out[str(c)] = f"no piece of the split holds it and its {targets} targets (the longest: {longest} ids)"
    return out


def format_recall_table(res: dict) -> str:
    lines = ["| gap (tokens) | " + " | ".join(f"copy gain, {kind}" for kind in res["copy"]) + " |",
             "|---:|" + "---:|" * len(res["copy"])]
    kinds = list(res["copy"].values())
    for i, row in enumerate(kinds[0]):
        lines.append(f"| {row['gap']} | " + " | ".join(
            f"{k[i]['gain']:.3f} ({k[i]['nll_repeat']:.2f} vs {k[i]['nll_control']:.2f})" for k in kinds) + " |")
    if res.get("gaps_left_out"):
        lines.append(f"gaps {res['gaps_left_out']} left out: the passage ({res['settings']['passage']} ids) twice with "
                     f"such a gap passes the model's context of {res['trained_context']}")
    r = res["repeats"]
    if r["nll_repeat"] is not None:
        lines.append(f"\nin-window repeats ({r['ngram']}-grams, {r['repeat_tokens']:,} of "
                     f"{r['repeat_tokens'] + r['other_tokens']:,} targets): NLL {r['nll_repeat']:.3f} "
                     f"vs {r['nll_other']:.3f} on the other targets")
    else:
        lines.append(f"\nin-window repeats: no target in {r['windows']} windows closes a {r['ngram']}-gram heard "
                     "earlier in its window")
    exact = res["copy"].get("exact", [])
    if exact and "by_event" in exact[0]:
        # the families the rows hold, named as the model's tokenizer names them (`event_names`)
        families = list(dict.fromkeys(name for row in exact for name in row["by_event"]))
        lines.append("\n| gap | " + " | ".join(f"copy gain, {name}" for name in families) + " |\n|---:|"
                     + "---:|" * len(families))
        lines += [f"| {row['gap']} | " + " | ".join(
            f"{row['by_event'][n]['gain']:.2f}" if n in row["by_event"] else "-" for n in families) + " |"
            for row in exact]
    lines.append("\n| context (tokens) | NLL of the same targets |\n|---:|---:|")
    lines += [f"| {c['context']} | {c['nll']:.4f} |" for c in res["context"] if c["nll"] is not None]
    lines += [f"context {c} left out: {why}" for c, why in res.get("contexts_left_out", {}).items()]
    return "\n".join(lines)


def plot_recall(results: list[dict], labels: list[str], path) -> None:
    """Copy gain vs gap (solid exact, dashed transposed) and NLL vs context, one line per result."""
    from matplotlib.figure import Figure

    # matplotlib only when drawing: the training callback's copy probe imports this module
    from musictx.io.piano_roll import save_figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    gain_ax, ctx_ax = fig.subplots(1, 2)
    for res, label, colour in zip(results, labels, [f"C{i}" for i in range(10)], strict=False):
        for kind, style in (("exact", "-"), ("transposed", "--")):
            rows = res["copy"].get(kind, [])
            gain_ax.plot([r["gap"] for r in rows], [r["gain"] for r in rows], style, marker="o", color=colour,
                         label=f"{label}, {kind}")
        rows = [c for c in res["context"] if c["nll"] is not None]
        ctx_ax.plot([c["context"] for c in rows], [c["nll"] for c in rows], marker="o", color=colour, label=label)
        ctx_ax.axvline(res["trained_context"], color=colour, lw=0.8, ls=":")
    gain_ax.axhline(0, color="grey", lw=0.8)
    gain_ax.set(xlabel="gap between the passage and its repeat (tokens)", ylabel="copy gain (nats/token)",
                title="[S, F, S] vs [U, F, S]: NLL of the repeat")
    ctx_ax.set(xlabel="context before the targets (tokens)", ylabel="NLL (nats/token)", xscale="log",
               title="the same targets, more context (dotted: trained)")
    gain_ax.legend(fontsize=7)
    ctx_ax.legend(fontsize=7)
    save_figure(fig, path)
