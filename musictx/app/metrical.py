"""The app's request for a metrical model (`musictx.app.core.Continuer` on the pop model): the seed cut at
bar lines, whole bars sampled, results written with the seed's named tracks, tempo map and meter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import Tensor

from musictx.app.messages import instruments_line
from musictx.app.settings import DRUMS_BOX
from musictx.generation import apply_programs, parse_programs, sample_name, write_take
from musictx.io.dynamics import seed_rule
from musictx.listed import counted
from musictx.tasks import bars_for, metrical_take, parts_line, pickup_notes, sample_bars, seed_drum_loop, seed_of


class BarProgress:
    """``on_step`` reporting the share of the bars asked for that the samples have drawn (their Bar ids)."""

    def __init__(self, bar_id: int, bars: int, report):
        self.bar_id, self.bars, self.report, self.count = bar_id, bars, report, None

    def __call__(self, next_ids: Tensor, done: Tensor) -> None:
        is_bar = next_ids.cpu().numpy() == self.bar_id
        self.count = is_bar.astype(np.int64) if self.count is None else self.count + is_bar
        fraction = float(np.minimum(self.count / self.bars, 1.0).mean())
        self.report(fraction, f"generating: bar {int(self.count.mean())} of {self.bars}")


def sample_and_write(model, audio: bool, out: Path, opts, report, lineage, take_name, check_seconds) -> tuple:
    """(seed, [(record, ids)], the line about the seed's tracks (`parts_line`), its meter where its bars were read
    otherwise than the file says (`MetricalSeed.meter_found`) and a pickup left out ("" for none)) of one request
    on the metrical ``model`` (`musictx.app.models.Loaded`); WAVs when ``audio``; ``check_seconds(seed seconds)``
    refuses a seed too long; the caller makes the page's results."""
    tok = model.tokenizer
    net = model.net
    seed = seed_of(tok, opts, getattr(net, "learnt_programs", None), seed_rule(opts, net))
    check_seconds(seed.seconds)
    loop = seed_drum_loop(net, tok, seed, opts.drums, opts.ending)
    bars = bars_for(seed, opts.length_seconds, opts.length_bars)
    pieces = sample_bars(net, tok, seed, opts, num_samples=opts.num_samples, bars=bars,
                         on_step=BarProgress(tok.bar_id, bars, report), ending=opts.ending)
    out.mkdir(parents=True)
    written, unset = [], ""
    for i, ids in enumerate(pieces):
        report(1.0, f"writing sample {i + 1} of {len(pieces)} (piano roll, audio)")
        take = metrical_take(tok, seed, ids, opts.include_seed, loop)
        apply_programs([take], parse_programs(opts.programs))
        unset = unset or instruments_line(opts.programs, take)  # the seed's tracks: the same for every sample
        rec = write_take(out, sample_name(i), take, opts.soundfont, audio)
        name = f"{lineage.stem}_cont_{take_name(lineage.stem):02d}"
        for suffix in (".mid", ".png", ".wav"):  # the page names results after the upload
            src = out / f"{Path(rec['midi']).stem}{suffix}"
            if src.exists():
                src.rename(out / f"{name}{suffix}")
        rec.update(midi=f"{name}.mid", png=f"{name}.png", wav=f"{name}.wav" if rec["wav"] else None)
        written.append((rec, np.concatenate([seed.ids, ids])))
    stop = f'untick "{DRUMS_BOX}": they stop where the seed does'
    line = parts_line(net, seed, loop, stop, say_off=False) or ""
    if seed.meter_found:  # bars read otherwise than the file's meter says: the command printed it, the page did not
        line = f"{line}. {seed.meter_found}" if line else seed.meter_found
    if not opts.seed_from and (left := pickup_notes(seed)):  # the results start at the seed's first full bar
        pickup = (f"The seed is bars {seed.first_bar + 1}-{seed.first_bar + seed.bars}, from its first full bar: "
                  f"the {counted(left, 'note')} of the pickup before it {'is' if left == 1 else 'are'} left out.")
        line = f"{line}. {pickup}" if line else pickup
    return seed, written, " ".join(x for x in (line, unset) if x)
