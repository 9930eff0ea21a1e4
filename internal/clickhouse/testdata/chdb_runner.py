"""Runs weir's SQL in chDB (current ClickHouse, in-process) for the tests of
internal/clickhouse: they use it as a second server beside Debian's 18.16.

Protocol, on stdin/stdout: a request is one JSON line
  {"sql": "...", "params": {...}, "body": N}
followed by N bytes of data (an INSERT's RowBinary rows); the answer is one
JSON line {"ok": true, "len": N} followed by N bytes of output, or
{"ok": false, "error": "..."}. The session's data lives in argv[1].
"""
import json
import os
import sys
import tempfile

from chdb import session


def main():
    sess = session.Session(sys.argv[1])
    tmpdir = tempfile.mkdtemp(prefix="weir-chdb-")
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    while True:
        line = inp.readline()
        if not line:
            return
        req = json.loads(line)
        sql, params, n = req["sql"], req.get("params") or None, req.get("body", 0)
        data = inp.read(n) if n else b""
        try:
            if n:
                # An INSERT ... FORMAT RowBinary with its rows: chDB reads
                # them from a file (what the HTTP body is to a server).
                path = os.path.join(tmpdir, "body.bin")
                with open(path, "wb") as f:
                    f.write(data)
                head, fmt, tail = sql.rpartition("FORMAT ")
                sql = head + "FROM INFILE '" + path + "' FORMAT " + tail
            res = sess.query(sql, "RowBinary", params=params)
            b = res.bytes() if res is not None else b""
            out.write(json.dumps({"ok": True, "len": len(b)}).encode() + b"\n")
            out.write(b)
        except Exception as e:  # the error goes back to the Go test
            out.write(json.dumps({"ok": False, "error": str(e)}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    main()
