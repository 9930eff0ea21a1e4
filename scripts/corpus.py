#!/usr/bin/env python3
"""Compare weir's IP packet and byte totals with tshark's on a corpus of captures.

Usage: scripts/corpus.py --weir BIN [--jobs N] [--detail] [--tsv FILE] CORPUS_DIR...

Every file under CORPUS_DIR is read by `weir capture --read FILE -o json` (one
flow per key for the whole file: idle timeout of 100,000 hours, no active
timeout, no store) and by tshark (reassembly off). tshark's side is summed here,
per packet: the outermost IP header (the first `ip` or `ipv6` in
frame.protocols), its IP total length (ip.len, or 40 + ipv6.plen), as
docs/record.md defines weir's bytes. Nothing is downloaded: docs/corpus.md says
how to build a corpus.

The output is one table by link type (Wireshark's name for the file's
encapsulation): files, files weir reads, files whose frames weir skips as an
unknown link type, IP packets and bytes weir vs tshark, files exact and files
mismatched; then every mismatched file, and the link types weir skips. With
--detail each mismatched file also gets the (source, destination) pairs whose
counts differ. Exit status 1 if any file of a link type weir reads mismatches.
"""

import argparse
import collections
import concurrent.futures
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading

TSHARK_VERSION = ""  # "4.0.17": part of the cache key
IDLE = "100000h"  # one record per flow key for any capture in a corpus

FIELDS = ["frame.encap_type", "frame.protocols", "frame.len", "ip.len", "ipv6.plen",
          "ip.src", "ip.dst", "ipv6.src", "ipv6.dst"]


def run(cmd, timeout=600):
    """Runs cmd, returns (rc, stdout, stderr); rc None on a timeout."""
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout"
    return p.returncode, p.stdout, p.stderr


def capinfo(path):
    """Wireshark's name of the file's encapsulation and its frame count (capinfos),
    or (None, None) if capinfos cannot read it to the end."""
    rc, out, _ = run(["capinfos", "-T", "-r", "-E", "-c", path], timeout=120)
    cols = out.decode("utf-8", "replace").strip().split("\t")
    if rc != 0 or len(cols) < 3 or not cols[2].strip().isdigit():
        return None, None
    return cols[1], int(cols[2])


def tshark_cmd(path):
    cmd = ["tshark", "-n", "-r", path, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
           "-o", "tcp.desegment_tcp_streams:FALSE", "-T", "fields", "-E", "separator=|",
           "-E", "occurrence=f", "-e", "frame.number"]
    for f in FIELDS:
        cmd += ["-e", f]
    return cmd


def new_tshark():
    return {"frames": 0, "packets": 0, "bytes": 0, "pairs": collections.Counter(),
            "pair_bytes": collections.Counter(), "encaps": collections.Counter(),
            "paths": collections.Counter(), "error": None}


def add_packet(res, d):
    """Adds one tshark line: the outermost IP header and its IP total length."""
    res["frames"] += 1
    res["encaps"][d["frame.encap_type"]] += 1
    protos = d["frame.protocols"].split(":")
    first = next((i for i, p in enumerate(protos) if p in ("ip", "ipv6")), None)
    if first is None:
        return
    # the layers below the outermost IP header: how it was carried
    res["paths"][":".join(p for p in protos[1:first + 1] if p != "ethertype")] += 1
    if protos[first] == "ip":
        n, src, dst = d["ip.len"], d["ip.src"], d["ip.dst"]
        n = int(n, 0) if n else 0
    else:
        n, src, dst = d["ipv6.plen"], d["ipv6.src"], d["ipv6.dst"]
        n = 40 + int(n, 0) if n else 0
    res["packets"] += 1
    res["bytes"] += n
    res["pairs"][(src, dst)] += 1
    res["pair_bytes"][(src, dst)] += n


def tshark_lines(out):
    for line in out.decode("utf-8", "replace").splitlines():
        v = line.split("|")
        if len(v) == len(FIELDS) + 1 and v[0].isdigit():
            yield int(v[0]), dict(zip(FIELDS, v[1:]))


def tshark_one(path):
    """tshark's side of one file, read on its own."""
    rc, out, err = run(tshark_cmd(path))
    res = new_tshark()
    if rc is None:
        res["error"] = "tshark timed out"
    elif rc != 0:
        msg = err.decode("utf-8", "replace").strip().splitlines()
        res["error"] = "tshark: " + (msg[-1][:120] if msg else "exit status %d" % rc)
    for _, d in tshark_lines(out):
        add_packet(res, d)
    return res


def tshark_batch(paths, counts, tmpdir):
    """tshark's side of many files read in one tshark run (its start-up is most
    of the cost): mergecap concatenates them, each keeping its own interfaces
    and link types, and frame numbers say which file a frame came from. None
    if the merged file does not hold exactly the frames capinfos counted."""
    merged = os.path.join(tmpdir, "batch-%d.pcapng" % threading.get_ident())
    rc, _, _ = run(["mergecap", "-a", "-I", "none", "-F", "pcapng", "-w", merged] + paths)
    try:
        if rc != 0:
            return None
        rc, out, _ = run(tshark_cmd(merged))
        if rc != 0:
            return None
        ends, total = [], 0
        for c in counts:
            total += c
            ends.append(total)
        results = [new_tshark() for _ in paths]
        i, n = 0, 0
        for num_, d in tshark_lines(out):
            while i < len(ends) and num_ > ends[i]:
                i += 1
            if i == len(ends):
                return None
            add_packet(results[i], d)
            n += 1
        if n != total:
            return None
        return results
    finally:
        if os.path.exists(merged):
            os.remove(merged)


def cache_key(h):
    return h + "-" + TSHARK_VERSION


def to_json(res):
    r = dict(res)
    for k in ("pairs", "pair_bytes"):
        r[k] = [[a, b, c] for (a, b), c in res[k].items()]
    return r


def from_json(r):
    for k in ("pairs", "pair_bytes"):
        r[k] = collections.Counter({(a, b): c for a, b, c in r[k]})
    for k in ("encaps", "paths"):
        r[k] = collections.Counter(r[k])
    return r


def num(s):
    return int(s.replace(",", ""))


def weir_side(weir, path):
    """weir's totals (its JSON records) and its --stats counters."""
    cmd = [weir, "capture", "--read", path, "-o", "json", "--idle-timeout", IDLE,
           "--active-timeout", "0", "--data-dir", "off", "--stats"]
    rc, out, err = run(cmd)
    res = {"packets": 0, "bytes": 0, "pairs": collections.Counter(), "pair_bytes": collections.Counter(),
           "errors": {}, "nonip": {}, "error": None, "rc": rc}
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        res["packets"] += r["packets"] + r["rev_packets"]
        res["bytes"] += r["bytes"] + r["rev_bytes"]
        fwd, rev = (r["src_ip"], r["dst_ip"]), (r["dst_ip"], r["src_ip"])
        res["pairs"][fwd] += r["packets"]
        res["pair_bytes"][fwd] += r["bytes"]
        res["pairs"][rev] += r["rev_packets"]
        res["pair_bytes"][rev] += r["rev_bytes"]
    text = err.decode("utf-8", "replace")
    for line in text.splitlines():
        m = re.match(r"^(errors|non-ip)\s+[\d,]+:?\s*(.*)$", line)
        if m:
            pairs = dict((k, num(c)) for k, c in re.findall(r"(\S+) ([\d,]+)", m.group(2)))
            res["errors" if m.group(1) == "errors" else "nonip"] = pairs
        elif line.startswith("weir capture:"):
            res["error"] = (res["error"] + "; " if res["error"] else "") + line[len("weir capture: "):][:160]
    if rc is None:
        res["error"] = "weir timed out"
    return res


def result(path, encap, t, w):
    name = encap
    if t["frames"] == 0:
        name = "no frames (%s)" % (name or "unreadable")
    elif name in (None, "per-packet"):
        # Wireshark's encapsulation numbers (wtap.h) of the frames read
        name = "%s(wtap %s)" % (name or "?", ",".join(sorted(t["encaps"])))
    skipped = w["errors"].get("unknown_link_type", 0)
    return {"path": path, "encap": name, "t": t, "w": w, "skipped": skipped,
            "exact": t["packets"] == w["packets"] and t["bytes"] == w["bytes"]}


def tshark_all(files, cache, jobs):
    """tshark's side of every file (path, hash): from the cache, else in batches."""
    out, todo = {}, []
    for path, h in files:
        cp = os.path.join(cache, cache_key(h) + ".json") if cache else None
        if cp and os.path.exists(cp):
            with open(cp) as f:
                out[path] = from_json(json.load(f))
        else:
            todo.append((path, cp))
    infos = {}
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for (path, _), info in zip(todo, ex.map(lambda pc: capinfo(pc[0]), todo)):
            infos[path] = info
    batchable = [pc for pc in todo if infos[pc[0]][1] is not None]
    single = [pc for pc in todo if infos[pc[0]][1] is None]
    batches = [batchable[i:i + 100] for i in range(0, len(batchable), 100)]
    tmpdir = tempfile.mkdtemp(prefix="weir-corpus-")

    def do_batch(b):
        if len(b) == 1:
            return [tshark_one(b[0][0])]
        res = tshark_batch([p for p, _ in b], [infos[p][1] for p, _ in b], tmpdir)
        if res is None:  # a file mergecap or the merged run disagrees with: halve
            return do_batch(b[:len(b) // 2]) + do_batch(b[len(b) // 2:])
        return res

    done = 0
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        work = [(b, ex.submit(do_batch, b)) for b in batches] + [([pc], ex.submit(lambda p: [tshark_one(p)], pc[0])) for pc in single]
        for b, fut in work:
            for (path, cp), res in zip(b, fut.result()):
                res["encap"] = infos[path][0]
                out[path] = res
                if cp:
                    with open(cp, "w") as f:
                        json.dump(to_json(res), f)
            done += len(b)
            print("corpus: tshark read %d of %d files" % (done, len(todo)), file=sys.stderr)
    os.rmdir(tmpdir)
    return out


def files_under(dirs):
    for d in dirs:
        if os.path.isfile(d):
            yield d
            continue
        for root, subdirs, names in os.walk(d):
            subdirs.sort()
            for n in sorted(names):
                p = os.path.join(root, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    yield p


def fmt(n):
    return "{:,}".format(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weir", required=True, help="weir binary")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--detail", action="store_true", help="per (src, dst) differences of mismatched files")
    ap.add_argument("--tsv", help="also write one line per file here")
    ap.add_argument("--cache", help="keep tshark's results here, by file hash and tshark version "
                    "(tshark's side does not change with weir)")
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()

    paths, seen, dups = [], set(), 0
    for p in files_under(a.dirs):
        with open(p, "rb") as f:
            h = hashlib.sha256(f.read()).digest()
        if h in seen:
            dups += 1
            continue
        seen.add(h)
        paths.append((p, h.hex()))
    global TSHARK_VERSION
    TSHARK_VERSION = subprocess.run(["tshark", "--version"], capture_output=True).stdout.decode().split()[2]
    if a.cache:
        os.makedirs(a.cache, exist_ok=True)
    ts = tshark_all(paths, a.cache, a.jobs)
    results = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for (p, _), w in zip(paths, ex.map(lambda ph: weir_side(a.weir, ph[0]), paths)):
            results.append(result(p, ts[p]["encap"], ts[p], w))

    by = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r["encap"]):
        g = by.setdefault(r["encap"], collections.Counter())
        g["files"] += 1
        g["skipped"] += r["skipped"] > 0
        g["read"] += r["skipped"] == 0 and r["t"]["frames"] > 0
        g["wp"] += r["w"]["packets"]
        g["tp"] += r["t"]["packets"]
        g["wb"] += r["w"]["bytes"]
        g["tb"] += r["t"]["bytes"]
        g["exact"] += r["exact"]
        g["mismatch"] += not r["exact"]
        g["mismatch_read"] += not r["exact"] and r["skipped"] == 0

    hdr = ["link type", "files", "read", "skipped", "IP pkts weir", "IP pkts tshark",
           "IP bytes weir", "IP bytes tshark", "exact", "mismatch"]
    rows = []
    tot = collections.Counter()
    for name, g in by.items():
        rows.append([name, fmt(g["files"]), fmt(g["read"]), fmt(g["skipped"]), fmt(g["wp"]), fmt(g["tp"]),
                     fmt(g["wb"]), fmt(g["tb"]), fmt(g["exact"]), fmt(g["mismatch"])])
        tot.update(g)
    rows.append(["total", fmt(tot["files"]), fmt(tot["read"]), fmt(tot["skipped"]), fmt(tot["wp"]), fmt(tot["tp"]),
                 fmt(tot["wb"]), fmt(tot["tb"]), fmt(tot["exact"]), fmt(tot["mismatch"])])
    print("%d files (%d more were copies of these, left out)\n" % (len(paths), dups))
    print("| " + " | ".join(hdr) + " |")
    print("|" + "|".join(["---"] + ["---:"] * (len(hdr) - 1)) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")

    print("\nmismatches on files weir reads (no frame skipped as an unknown link type):")
    bad = 0
    for r in results:
        if r["exact"] or r["skipped"]:
            continue
        bad += 1
        t, w = r["t"], r["w"]
        print("  %s [%s]: packets weir %s tshark %s, bytes weir %s tshark %s" % (
            r["path"], r["encap"], fmt(w["packets"]), fmt(t["packets"]), fmt(w["bytes"]), fmt(t["bytes"])))
        notes = []
        if w["errors"]:
            notes.append("weir errors " + " ".join("%s=%d" % kv for kv in sorted(w["errors"].items())))
        if w["nonip"]:
            notes.append("non-ip " + " ".join("%s=%d" % kv for kv in sorted(w["nonip"].items())))
        if w["error"]:
            notes.append("weir: " + w["error"])
        if t["error"]:
            notes.append(t["error"])
        notes.append("tshark IP carried by " + ", ".join("%s=%d" % kv for kv in t["paths"].most_common(6)))
        for n in notes:
            print("      " + n)
        if a.detail:
            keys = set(t["pairs"]) | set(w["pairs"])
            diffs = [(k, w["pairs"][k], t["pairs"][k], w["pair_bytes"][k], t["pair_bytes"][k]) for k in keys
                     if (w["pairs"][k], w["pair_bytes"][k]) != (t["pairs"][k], t["pair_bytes"][k])]
            for k, wp, tp, wb, tb in sorted(diffs, key=lambda d: -abs(d[2] - d[1]))[:10]:
                print("      %s > %s: packets weir %d tshark %d, bytes weir %d tshark %d" % (k[0], k[1], wp, tp, wb, tb))

    print("\nlink types weir skips (frames counted as unknown_link_type): files, frames, IP packets tshark sees")
    sk = collections.OrderedDict()
    for r in sorted(results, key=lambda r: r["encap"]):
        if r["skipped"]:
            g = sk.setdefault(r["encap"], collections.Counter())
            g["files"] += 1
            g["frames"] += r["skipped"]
            g["ip"] += r["t"]["packets"] - r["w"]["packets"]
    for name, g in sk.items():
        print("  %-28s %5d files %9s frames %9s IP packets" % (name, g["files"], fmt(g["frames"]), fmt(g["ip"])))

    if a.tsv:
        with open(a.tsv, "w") as f:
            f.write("path\tlink_type\tframes\tskipped\tweir_packets\ttshark_packets\tweir_bytes\ttshark_bytes\texact\n")
            for r in results:
                f.write("%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n" % (
                    r["path"], r["encap"], r["t"]["frames"], r["skipped"], r["w"]["packets"], r["t"]["packets"],
                    r["w"]["bytes"], r["t"]["bytes"], "yes" if r["exact"] else "no"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
