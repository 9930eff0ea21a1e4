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


def encap_name(path):
    """Wireshark's name of the file's encapsulation (capinfos -E)."""
    rc, out, _ = run(["capinfos", "-T", "-r", "-E", path], timeout=120)
    if rc != 0 or not out.strip():
        return None
    cols = out.decode("utf-8", "replace").strip().split("\t")
    return cols[-1] if len(cols) > 1 else None


def tshark_side(path):
    """Per-packet outermost IP header from tshark: totals and per-pair counts."""
    cmd = ["tshark", "-n", "-r", path, "-o", "ip.defragment:FALSE", "-o", "ipv6.defragment:FALSE",
           "-o", "tcp.desegment_tcp_streams:FALSE", "-T", "fields", "-E", "separator=|",
           "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    rc, out, err = run(cmd)
    res = {"frames": 0, "packets": 0, "bytes": 0, "pairs": collections.Counter(),
           "pair_bytes": collections.Counter(), "encaps": collections.Counter(),
           "paths": collections.Counter(), "error": None}
    if rc is None:
        res["error"] = "tshark timed out"
    elif rc != 0:
        res["error"] = "tshark: " + err.decode("utf-8", "replace").strip().splitlines()[-1][:120] if err.strip() else "tshark rc %d" % rc
    for line in out.decode("utf-8", "replace").splitlines():
        v = line.split("|")
        if len(v) != len(FIELDS):
            continue
        d = dict(zip(FIELDS, v))
        res["frames"] += 1
        res["encaps"][d["frame.encap_type"]] += 1
        protos = d["frame.protocols"].split(":")
        first = next((i for i, p in enumerate(protos) if p in ("ip", "ipv6")), None)
        if first is None:
            continue
        # the layers above the outermost IP header: how it was carried
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
    return res


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


def check(weir, path):
    t = tshark_side(path)
    w = weir_side(weir, path)
    name = encap_name(path)
    if t["frames"] == 0:
        name = "no frames (%s)" % (name or "unreadable")
    elif name in (None, "per-packet"):
        # Wireshark's encapsulation numbers (wtap.h) of the frames read
        name = "%s(wtap %s)" % (name or "?", ",".join(sorted(t["encaps"])))
    skipped = w["errors"].get("unknown_link_type", 0)
    return {"path": path, "encap": name, "t": t, "w": w, "skipped": skipped,
            "exact": t["packets"] == w["packets"] and t["bytes"] == w["bytes"]}


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
        paths.append(p)
    results = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for i, r in enumerate(ex.map(lambda p: check(a.weir, p), paths), 1):
            results.append(r)
            if i % 100 == 0:
                print("corpus: %d of %d files" % (i, len(paths)), file=sys.stderr)

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
