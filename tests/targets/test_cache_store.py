"""The on-disk store behind the compile cache: atomic, verified, bounded, shared."""

import multiprocessing as mp
import os

import pytest

from targets.cache.store import MAGIC, Store, decode, encode

KEY = "0123456789abcdef" * 4


def test_round_trip_and_miss(tmp_path):
    s = Store(tmp_path)
    assert s.get(KEY) is None
    s.put(KEY, {"obj": b"\x00\x01" * 100, "meta": b'{"a": 1}'})
    assert s.get(KEY) == {"obj": b"\x00\x01" * 100, "meta": b'{"a": 1}'}


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "header"])
def test_corrupt_or_truncated_entry_is_a_miss_and_removed(tmp_path, damage):
    s = Store(tmp_path)
    s.put(KEY, {"obj": b"x" * 1000})
    path = s.path(KEY)
    data = open(path, "rb").read()
    if damage == "flip":
        data = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
    elif damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "empty":
        data = b""
    else:
        data = data.replace(MAGIC, b"NOT-A-CACHE!!")
    open(path, "wb").write(data)
    assert s.get(KEY) is None
    assert not os.path.exists(path)
    s.put(KEY, {"obj": b"y"})
    assert s.get(KEY) == {"obj": b"y"}


OTHER = "fedcba9876543210" * 4


@pytest.mark.parametrize("how", ["swapped", "foreign", "key-edited", "version-1"])
def test_an_intact_entry_of_another_key_is_a_miss_never_loaded(tmp_path, how):
    """Issue 25 F4: after two entries were swapped on disk, each kernel ran the other's
    code.  An entry carries its key (covered by the checksum) and is checked on read."""
    s = Store(tmp_path)
    s.put(KEY, {"obj": b"mine"})
    s.put(OTHER, {"obj": b"theirs"})
    path, other = s.path(KEY), s.path(OTHER)
    mine, theirs = open(path, "rb").read(), open(other, "rb").read()
    if how == "swapped":
        open(path, "wb").write(theirs)
        open(other, "wb").write(mine)
    elif how == "foreign":          # copied in from another cache folder
        open(path, "wb").write(theirs)
    elif how == "key-edited":       # the header's key changed to match: checksum fails
        open(path, "wb").write(theirs.replace(OTHER.encode(), KEY.encode(), 1))
    else:                           # an entry of the old format, with no key
        head, _, payload = mine.partition(b"\n")
        magic, _, digest, size = head.split(b" ")
        open(path, "wb").write(b"CUVIL-CACHE-1 %s %s\n" % (digest, size) + payload)
    assert s.get(KEY) is None and not os.path.exists(path)
    if how == "swapped":
        assert s.get(OTHER) is None and not os.path.exists(other)
    s.put(KEY, {"obj": b"mine"})
    assert s.get(KEY) == {"obj": b"mine"}
    assert open(s.path(KEY), "rb").read().startswith(MAGIC + b" " + KEY.encode() + b" ")


def test_least_recently_used_entries_are_evicted_first(tmp_path):
    s = Store(tmp_path, max_bytes=3 * 1200)
    keys = [f"{k:064x}" for k in range(3)]
    for n, k in enumerate(keys):
        s.put(k, {"b": b"z" * 1000})
        os.utime(s.path(k), (1000 + n, 1000 + n))
    assert s.get(keys[0]) is not None          # used: now the most recent
    s.put(f"{9:064x}", {"b": b"z" * 1000})
    assert s.get(keys[1]) is None              # the least recently used went
    assert s.get(keys[0]) is not None and s.get(keys[2]) is not None
    assert s.info()["bytes"] <= s.max_bytes


def test_bad_keys_and_payloads_are_refused(tmp_path):
    with pytest.raises(ValueError, match="expected 16-128 lowercase hex digits"):
        Store(tmp_path).path("../../etc/passwd")
    with pytest.raises(ValueError, match="shorter than its header"):
        decode(b"abc")
    assert decode(encode({})) == {}


def test_unwritable_folder_is_not_an_error(tmp_path):
    f = tmp_path / "file"
    f.write_text("not a folder")
    s = Store(f)                       # the folder is a file: nothing can be written
    s.put(KEY, {"a": b"b"})
    assert s.get(KEY) is None


def test_stale_temp_files_are_cleaned_and_fresh_ones_kept(tmp_path):
    s = Store(tmp_path)
    s.put(KEY, {"a": b"b"})
    folder = os.path.dirname(s.path(KEY))
    stale, fresh = os.path.join(folder, ".tmp-old.part"), os.path.join(folder, ".tmp-new.part")
    for p in (stale, fresh):
        open(p, "wb").write(b"partial")
    os.utime(stale, (1, 1))
    assert len(s.entries()) == 1                # temp files are never entries
    assert not os.path.exists(stale) and os.path.exists(fresh)


def _hammer(directory, worker, rounds, queue):
    s = Store(directory, max_bytes=1 << 30)
    bad = 0
    for r in range(rounds):
        k = (worker + r) % 12                   # overlapping keys across workers
        key = f"{k:064x}"
        want = {"obj": bytes([k]) * (4000 + k), "key": key.encode()}
        got = s.get(key)
        if got is not None and got != want:
            bad += 1
        s.put(key, want)
    queue.put(bad)


def test_eight_processes_share_one_folder_and_never_read_a_wrong_entry(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(str(tmp_path), w, 40, queue))
             for w in range(8)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert results == [0] * 8
    s = Store(tmp_path)
    for k in range(12):
        key = f"{k:064x}"
        assert s.get(key) == {"obj": bytes([k]) * (4000 + k), "key": key.encode()}
    leftovers = [n for _, _, files in os.walk(tmp_path) for n in files
                 if not n.endswith(".cvl")]
    assert leftovers == []
