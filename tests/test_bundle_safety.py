"""Run bundles (musictx.checkpoints.bundle) against hostile and broken parts, with the real tarfile module and
the real import script (scripts/import_pop_large.py): nothing is written outside the target, no set of parts
from two exports or a cut set is unpacked, the shipped models cannot be replaced, and every refusal is one
line (issue 68)."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from musictx.checkpoints.bundle import MAGIC, BundleError, bundle_parts, read_bundle, write_bundle, write_parts

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "import_pop_large.py"


def _import_script():
    spec = importlib.util.spec_from_file_location("import_pop_large", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tree(root: Path) -> dict[str, object]:
    """Every entry under ``root`` (links not followed): a file's sha256, a link's target, a folder's name."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_file():
                seen[rel] = ("file", hashlib.sha256(path.read_bytes()).hexdigest())
            else:
                seen[rel] = ("dir",)
    return seen


def _one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text, text
    return text


def _cve_tar(outside: str) -> bytes:
    """The pattern of CPython's CVE-2025-4517 / CVE-2025-4330: nested long folder names, each with a short
    symlink to it (the resolved path outgrows PATH_MAX, where os.path.realpath stops resolving), a symlink
    at the bottom that climbs all the way out, a link through it, then a hardlink to the file ``outside``
    beside the destination, written through, and a file created through the climbing link."""
    comp, steps, path = "d" * 247, "abcdefghijklmnop", ""
    buf = io.BytesIO()

    def add(name, kind, link="", body=None):
        info = tarfile.TarInfo(name)
        info.type, info.linkname = kind, link
        info.size = len(body) if body is not None else 0
        tar.addfile(info, io.BytesIO(body) if body is not None else None)

    with tarfile.open(fileobj=buf, mode="w") as tar:
        for step in steps:
            add(os.path.join(path, comp), tarfile.DIRTYPE)
            add(os.path.join(path, step), tarfile.SYMTYPE, comp)
            path = os.path.join(path, comp)
        climb = os.path.join(*steps, "l" * 254)
        add(climb, tarfile.SYMTYPE, "../" * len(steps))
        add("escape", tarfile.SYMTYPE, climb + "/..")
        add("hard", tarfile.LNKTYPE, f"escape/{outside}")
        add("hard", tarfile.REGTYPE, body=b"OVERWRITTEN")
        add("escape/created.txt", tarfile.REGTYPE, body=b"CREATED")
    return buf.getvalue()


PATCHED = {(3, 9): 23, (3, 10): 18, (3, 11): 13, (3, 12): 11, (3, 13): 4}  # the releases that fixed it


def test_the_crafted_bundle_is_the_real_attack_on_an_unpatched_python(tmp_path):
    """The tar below is no straw man: tarfile's own ``filter="data"`` is led outside by it on this Python
    when it is one of the releases before the fix (3.11.7 here)."""
    (tmp_path / "outside.txt").write_text("original")
    (tmp_path / "dest").mkdir()
    with tarfile.open(fileobj=io.BytesIO(_cve_tar("outside.txt"))) as tar:
        try:
            tar.extractall(tmp_path / "dest", filter="data")
        except (tarfile.TarError, OSError):
            pass
    escaped = (tmp_path / "outside.txt").read_text() != "original" or (tmp_path / "created.txt").exists()
    fixed_in = PATCHED.get(sys.version_info[:2])
    if fixed_in is None or sys.version_info[2] >= fixed_in:
        pytest.skip(f"Python {sys.version.split()[0]} has the fix; the import test below still runs")
    assert escaped


@pytest.mark.parametrize("depth", [1, 3])
def test_the_crafted_bundle_writes_nothing_outside_through_the_real_import(tmp_path, depth):
    out = tmp_path / "OUT"
    write_parts(_cve_tar("outside.txt"), out / "evil", 15)
    to = tmp_path.joinpath(*["deep"] * (depth - 1), "model")
    to.parent.mkdir(parents=True, exist_ok=True)
    (to.parent / "outside.txt").write_text("original")  # the file beside the target the hardlink aims at
    (tmp_path / "outside.txt").write_text("original")
    before = _tree(tmp_path)
    run = subprocess.run([sys.executable, str(SCRIPT), str(out), "--run", "evil", "--to", str(to)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("import_pop_large.py: error: "), run.stderr
    assert "not a regular file or folder" in run.stderr and str(out) in run.stderr
    assert _tree(tmp_path) == before  # nothing made, nothing changed, anywhere under the test's folder


def _folder(root: Path) -> Path:
    (root / "model" / "sub").mkdir(parents=True)
    (root / "model" / "weights.bin").write_bytes(os.urandom(150_000))
    (root / "model" / "sub" / "empty.txt").write_bytes(b"")
    (root / "train.json").write_text('{"final": true}')
    return root


def test_a_bundle_comes_back_byte_equal(tmp_path):
    src = _folder(tmp_path / "run")
    parts = write_bundle(src, tmp_path / "OUT" / "mid", 64 / 1024)
    assert [p.name for p in parts] == ["mid.tar.1-of-3", "mid.tar.2-of-3", "mid.tar.3-of-3"]
    assert all(p.stat().st_size <= 64 * 1024 and p.read_bytes().startswith(MAGIC) for p in parts)
    back = read_bundle(tmp_path / "OUT", "mid", tmp_path / "back")
    assert _tree(back) == _tree(src)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["OUT", "back", "run"]  # no temporary folder left
    with pytest.raises(BundleError, match="already exists"):
        read_bundle(tmp_path / "OUT", "mid", back)
    (src / "train.json").write_text('{"final": false}')
    write_bundle(src, tmp_path / "OUT" / "mid", 64 / 1024)
    assert (read_bundle(tmp_path / "OUT", "mid", back, replace=True) / "train.json").read_text() == '{"final": false}'


def _refused(where: Path, name: str, dest: Path, match: str) -> None:
    """read_bundle refuses in one line naming ``where`` or a part in it, and nothing appears beside ``dest``."""
    before = sorted(os.listdir(dest.parent))
    with pytest.raises(BundleError, match=match) as err:
        read_bundle(where, name, dest)
    assert str(where) in _one_line(err.value)
    assert sorted(os.listdir(dest.parent)) == before and not dest.exists()


def test_a_write_killed_between_its_renames_is_refused_not_mixed(tmp_path):
    """The issue's case: an export of 4 parts over an older one of 4, killed (SIGKILL) after 2 renames."""
    src = _folder(tmp_path / "run")
    out = tmp_path / "OUT"
    write_bundle(src, out / "mid", 48 / 1024)
    old = {p.name: p.read_bytes() for *_, p in bundle_parts(out, "mid")}
    (src / "model" / "weights.bin").write_bytes(os.urandom(150_000))
    code = ("import os, signal, sys; from pathlib import Path; from musictx.checkpoints import bundle\n"
            "real, n = Path.replace, [0]\n"
            "def replace(self, target):\n"
            "    n[0] += 1\n"
            "    if n[0] == 3: os.kill(os.getpid(), signal.SIGKILL)\n"
            "    return real(self, target)\n"
            "Path.replace = replace\n"
            "bundle.write_bundle(Path(sys.argv[1]), Path(sys.argv[2]), 48 / 1024)\n")
    killed = subprocess.run([sys.executable, "-c", code, str(src), str(out / "mid")], cwd=ROOT, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    now = {p.name: p.read_bytes() for *_, p in bundle_parts(out, "mid")}
    assert sorted(now) == sorted(old) == [f"mid.tar.{k}-of-4" for k in range(1, 5)]
    assert [now[k] == old[k] for k in sorted(now)] == [False, False, True, True]
    _refused(out, "mid", tmp_path / "back", r"mixes parts of 2 exports \(a write was cut")


def test_parts_of_two_exports_with_the_same_count_are_refused(tmp_path):
    a, b = _folder(tmp_path / "a"), _folder(tmp_path / "b")
    write_bundle(a, tmp_path / "A" / "mid", 64 / 1024)
    write_bundle(b, tmp_path / "B" / "mid", 64 / 1024)
    os.replace(tmp_path / "B" / "mid.tar.2-of-3", tmp_path / "A" / "mid.tar.2-of-3")
    _refused(tmp_path / "A", "mid", tmp_path / "back", "mixes parts of 2 exports")
    (tmp_path / "A" / "mid.tar.1-of-2").write_bytes((tmp_path / "A" / "mid.tar.1-of-3").read_bytes())
    _refused(tmp_path / "A", "mid", tmp_path / "back", "mixes parts of 2 exports")


@pytest.mark.parametrize("damage, match", [
    ("missing", r"misses part\(s\) 2 of 3 \(the call was cut\?\)"),
    ("truncated", r"mid.tar.3-of-3: cut short \(\d+ of \d+ bytes\)"),
    ("longer", "longer than its manifest"),
    ("flipped", "damaged"),
    ("renamed", "its header says part 3 of 3"),
    ("no header", "not a part of a musictx bundle"),
    ("a fifo", "not a regular file"),
])
def test_a_cut_or_damaged_set_is_refused_in_one_line(tmp_path, damage, match):
    write_bundle(_folder(tmp_path / "run"), tmp_path / "OUT" / "mid", 64 / 1024)
    part = tmp_path / "OUT" / "mid.tar.3-of-3"
    data = part.read_bytes()
    if damage == "missing":
        (tmp_path / "OUT" / "mid.tar.2-of-3").unlink()
    elif damage == "truncated":
        part.write_bytes(data[:-100])
    elif damage == "longer":
        part.write_bytes(data + b"\0" * 512)
    elif damage == "flipped":
        part.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    elif damage == "renamed":
        os.replace(part, tmp_path / "OUT" / "mid.tar.2-of-3")
        part.write_bytes(data)
    elif damage == "no header":
        part.write_bytes(data[data.index(b"\n") + 1:])
    else:
        part.unlink()
        os.mkfifo(part)
    _refused(tmp_path / "OUT", "mid", tmp_path / "back", match)


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", body: bytes = b"x", **attrs) -> bytes:
    """A tar of ``ok.txt`` and the member ``name``, its headers written as they are (tarfile's writer would not
    write a 50 GB size without its data)."""
    def raw(info: tarfile.TarInfo, data: bytes) -> bytes:
        return info.tobuf(tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % 512)

    ok = tarfile.TarInfo("ok.txt")
    ok.size = 2
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(body) if kind == tarfile.REGTYPE else 0
    for key, value in attrs.items():
        setattr(info, key, value)
    return raw(ok, b"ok") + raw(info, body if kind == tarfile.REGTYPE else b"") + b"\0" * 1024


HOSTILE = {
    "symlink": (_member("link", tarfile.SYMTYPE, "/etc/passwd"), "not a regular file or folder"),
    "hardlink": (_member("hard", tarfile.LNKTYPE, "ok.txt"), "not a regular file or folder"),
    "char device": (_member("tty", tarfile.CHRTYPE, devmajor=5, devminor=0), "not a regular file or folder"),
    "block device": (_member("sda", tarfile.BLKTYPE, devmajor=8, devminor=0), "not a regular file or folder"),
    "fifo": (_member("pipe", tarfile.FIFOTYPE), "not a regular file or folder"),
    "contiguous": (_member("c", tarfile.CONTTYPE), "not a regular file or folder"),
    "absolute": (_member("/tmp/musictx_bundle_escape"), "not a plain relative name"),
    "dot-dot": (_member("../escape.txt"), "not a plain relative name"),
    "inner dot-dot": (_member("model/../../escape.txt"), "not a plain relative name"),
    "50 GB header": (_member("big.bin", body=b"", size=50 * 2**30), "claims 53687091200 bytes, more than"),
    "twice": (_member("ok.txt", body=b"again"), "appears twice"),
    "file and folder": (_member("ok.txt/inner"), "is both a file and a folder"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_member_that_is_not_a_plain_file_is_refused_before_anything_is_written(tmp_path, case):
    data, match = HOSTILE[case]
    write_parts(data, tmp_path / "OUT" / "evil", 15)
    _refused(tmp_path / "OUT", "evil", tmp_path / "back", match)
    assert not Path("/tmp/musictx_bundle_escape").exists()


def _main_error(capsys, argv: list[str]) -> str:
    """The real script's main, in this process: its one-line refusal on stderr, exit status 1."""
    with pytest.raises(SystemExit) as done:
        _import_script().main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 1 and err.count("\n") == 1 and err.startswith("import_pop_large.py: error: "), err
    return err


def test_an_import_into_the_shipped_models_is_refused(tmp_path, capsys):
    write_bundle(_folder(tmp_path / "run"), tmp_path / "OUT" / "pop", 15)
    pretrained = ROOT / "musictx" / "pretrained"
    before = _tree(pretrained)
    err = _main_error(capsys, [str(tmp_path / "OUT"), "--run", "pop", "--to", str(pretrained / "pop")])
    assert "inside the installed musictx package" in err and "--to" in err
    err = _main_error(capsys, [str(tmp_path / "OUT"), "--run", "pop", "--to", str(pretrained / "pop" / "new")])
    assert "inside the installed musictx package" in err
    assert _tree(pretrained) == before


def test_an_import_replaces_no_file_it_did_not_write(tmp_path, capsys):
    write_bundle(_folder(tmp_path / "run"), tmp_path / "OUT" / "mid", 15)
    (tmp_path / "x" / "model").mkdir(parents=True)
    (tmp_path / "x" / "model" / "config.json").write_text("{}")
    err = _main_error(capsys, [str(tmp_path / "OUT"), "--run", "mid", "--to", str(tmp_path / "x" / "model")])
    assert "config.json already exists and this run did not write it; pass --overwrite" in err
    (tmp_path / "y" / "mid_returned").mkdir(parents=True)
    err = _main_error(capsys, [str(tmp_path / "OUT"), "--run", "mid", "--to", str(tmp_path / "y" / "model")])
    assert "mid_returned already exists and this import did not write it; pass --overwrite" in err
    err = _main_error(capsys, [str(tmp_path / "OUT"), "--run", "large", "--to", str(tmp_path / "z" / "model")])
    assert "no bundle 'large'; found: mid" in err and not (tmp_path / "z").exists()
    assert "--windows -1: must be at least 1" in _main_error(capsys, [str(tmp_path), "--windows", "-1"])
