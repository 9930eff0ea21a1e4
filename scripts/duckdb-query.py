#!/usr/bin/env python3
"""make bench's DuckDB side: the same top-10 questions weir answers, on the
same rows (weir bench gendb --csv).

  duckdb-query.py load CSV DB          # CSV -> a DuckDB database file (table flows)
  duckdb-query.py query DB GROUP [COND] # top 10 by bytes both ways, as weir query -o csv prints it

query also prints "cpu SECONDS" on stderr: the process's CPU time (every
thread) from opening the database to the last row, without the
interpreter's start and the import.

GROUP is weir's attribute list (sip, dip, sport, dport, proto, comma
separated); COND is an SQL condition on the CSV's columns (dst_port = 443).
"""
import resource
import sys

import duckdb

COLS = {"sip": "src_ip", "dip": "dst_ip", "sport": "src_port", "dport": "dst_port", "proto": "proto"}


def load(csv, db):
    con = duckdb.connect(db)
    con.execute("CREATE TABLE flows AS SELECT * FROM read_csv(?, header = true)", [csv])
    con.close()


def query(db, group, cond):
    attrs = group.split(",")
    cols = ", ".join(COLS[a] for a in attrs)
    where = f"WHERE {cond}" if cond else ""
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    con = duckdb.connect(db, read_only=True)
    rows = con.execute(
        f"SELECT {cols}, count(*), sum(packets), sum(rev_packets), sum(bytes), sum(rev_bytes) "
        f"FROM flows {where} GROUP BY {cols} ORDER BY sum(bytes) + sum(rev_bytes) DESC LIMIT 10"
    ).fetchall()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    print(",".join(attrs + ["flows", "packets_out", "packets_in", "bytes_out", "bytes_in"]))
    for r in rows:
        print(",".join(str(v) for v in r))
    print(f"cpu {cpu:.3f}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "load":
        load(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (4, 5) and sys.argv[1] == "query":
        query(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) == 5 else "")
    else:
        sys.exit(__doc__)
