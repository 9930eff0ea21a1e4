package clickhouse

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/wire"
)

// Config says what Setup creates.
type Config struct {
	Database string // default "weir"
	// Kafka and Topic, when Kafka is not empty, add the ingestion from
	// Kafka: a Kafka engine table reading the topic as consumer group
	// Group (default "weir-clickhouse") with Consumers consumers
	// (default 1).
	Kafka     []string
	Topic     string
	Group     string
	Consumers int
	// Retention drops rows older than it (whole days; 0 keeps them) on
	// servers with TTL (19.6 and later); Setup warns on older ones.
	Retention time.Duration
}

// Table names, in Config.Database.
const (
	TableFlows = "flows"       // every record
	TableInput = "flows_input" // Null table: an INSERT of wire rows here fills flows and the rollups
	TableQueue = "flows_queue" // Kafka engine table
	// TableOffsets is where weir ingest records, per consumer group, topic
	// and partition, the last offset it inserted (before it commits to
	// Kafka), so that a group reading again rows it inserted skips them.
	TableOffsets = "ingest_offsets"
)

// Rollup is a table of per-bin sums kept by materialized views.
type Rollup struct {
	Table string
	Bin   time.Duration
	bin   string // the ClickHouse function that floors a DateTime to the bin
}

// Rollups are the rollup tables, coarsest first: Run picks the first that answers a query exactly.
var Rollups = []Rollup{
	{"flows_1h", time.Hour, "toStartOfHour"},
	{"flows_1m", time.Minute, "toStartOfMinute"},
}

// RollupDims are the columns a rollup groups by (besides its bin): a query
// that groups and filters only by these (and time, on bin boundaries) is
// answered from a rollup.
var RollupDims = []string{"node", "iface", "ip_version", "src_addr", "dst_addr", "dst_port", "proto"}

// rollupSums are the rollups' summed columns.
var rollupSums = []string{"packets", "bytes", "rev_packets", "rev_bytes", "flows", "drop_packets", "drop_bytes"}

func (c *Config) normalize() error {
	if c.Database == "" {
		c.Database = "weir"
	}
	if c.Group == "" {
		c.Group = "weir-clickhouse"
	}
	if c.Consumers == 0 {
		c.Consumers = 1
	}
	if err := CheckIdent("database", c.Database); err != nil {
		return err
	}
	if c.Consumers < 1 || c.Consumers > 64 {
		return fmt.Errorf("clickhouse: %d Kafka consumers: want 1 to 64", c.Consumers)
	}
	if c.Retention < 0 || c.Retention%(24*time.Hour) != 0 {
		return fmt.Errorf("clickhouse: retention %v: want whole days", c.Retention)
	}
	if len(c.Kafka) > 0 && c.Topic == "" {
		return fmt.Errorf("clickhouse: a Kafka ingestion needs its topic")
	}
	return nil
}

// flowColumns are the flows table's columns: start (the record's start,
// in seconds: the partitioning and sorting key) and every wire column but
// the version.
func flowColumns() []wire.Column {
	return append([]wire.Column{{Name: "start", Type: "DateTime"}}, wire.Columns[1:]...)
}

func columnList(cols []wire.Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = c.Name + " " + c.Type
	}
	return strings.Join(parts, ", ")
}

// startExpr is a wire row's start as a DateTime.
const startExpr = "toDateTime(intDiv(start_ns, 1000000000))"

// Statements are the DDL of cfg for a server with features f, in order;
// each is idempotent (IF NOT EXISTS). Warnings say what the server cannot
// do of what cfg asks.
func Statements(cfg Config, f Features) (stmts []*Stmt, warnings []string, err error) {
	if err := cfg.normalize(); err != nil {
		return nil, nil, err
	}
	db := cfg.Database
	ttl := func(col string) string {
		if cfg.Retention == 0 || !f.TTL {
			return ""
		}
		return fmt.Sprintf(" TTL %s + INTERVAL %d DAY", col, cfg.Retention/(24*time.Hour))
	}
	if cfg.Retention > 0 && !f.TTL {
		warnings = append(warnings, fmt.Sprintf("ClickHouse %v has no TTL (19.6 and later): retention is not applied; drop old partitions "+
			"(ALTER TABLE %s.%s DROP PARTITION 'YYYY-MM-DD') yourself", f.Version, db, TableFlows))
	}
	add := func(sql ...string) *Stmt {
		s := NewStmt(false).S(sql...)
		stmts = append(stmts, s)
		return s
	}
	add("CREATE DATABASE IF NOT EXISTS ", db)
	// Setup checks this one (the second) before it goes on. Sorted by time first: every query has a time range; then node and
	// interface, the commonest filters of a fleet.
	add("CREATE TABLE IF NOT EXISTS ", db, ".", TableFlows, " (", columnList(flowColumns()), ") ENGINE = MergeTree() ",
		"PARTITION BY toDate(start) ORDER BY (start, node, iface)", ttl("start"))
	for _, r := range Rollups {
		part := "toDate(bin)"
		if r.Bin >= time.Hour {
			part = "toYYYYMM(bin)"
		}
		cols := []string{"bin DateTime"}
		for _, d := range RollupDims {
			cols = append(cols, d+" "+colType(d))
		}
		for _, s := range rollupSums {
			cols = append(cols, s+" UInt64")
		}
		add("CREATE TABLE IF NOT EXISTS ", db, ".", r.Table, " (", strings.Join(cols, ", "), ") ENGINE = SummingMergeTree((",
			strings.Join(rollupSums, ", "), ")) PARTITION BY ", part, " ORDER BY (bin, ", strings.Join(RollupDims, ", "), ")", ttl("bin"))
	}
	// The views read the source (the input or the Kafka table) each: 18.16
	// does not cascade a view's inserts into the views of its target.
	views := func(source string) {
		names := make([]string, 0, len(wire.Columns))
		for _, c := range flowColumns()[1:] {
			names = append(names, c.Name)
		}
		add("CREATE MATERIALIZED VIEW IF NOT EXISTS ", db, ".", source, "_mv TO ", db, ".", TableFlows,
			" AS SELECT ", startExpr, " AS start, ", strings.Join(names, ", "), " FROM ", db, ".", source,
			" WHERE schema = ", fmt.Sprint(wire.Version))
		for _, r := range Rollups {
			sums := make([]string, len(rollupSums))
			for i, s := range rollupSums {
				sums[i] = "sum(" + s + ") AS " + s
				if s == "flows" {
					sums[i] = "count() AS flows"
				}
			}
			add("CREATE MATERIALIZED VIEW IF NOT EXISTS ", db, ".", source, "_", strings.TrimPrefix(r.Table, "flows_"), "_mv TO ", db, ".", r.Table,
				" AS SELECT ", r.bin, "(", startExpr, ") AS bin, ", strings.Join(RollupDims, ", "), ", ", strings.Join(sums, ", "),
				" FROM ", db, ".", source, " WHERE schema = ", fmt.Sprint(wire.Version), " GROUP BY bin, ", strings.Join(RollupDims, ", "))
		}
	}
	add("CREATE TABLE IF NOT EXISTS ", db, ".", TableInput, " (", columnList(wire.Columns), ") ENGINE = Null")
	views(TableInput)
	if len(cfg.Kafka) == 0 {
		// weir ingest's: merges keep the highest offset of a partition
		// (ReplacingMergeTree's version: UInt on 18.16), readers take max().
		add("CREATE TABLE IF NOT EXISTS ", db, ".", TableOffsets, " (", OffsetColumns,
			") ENGINE = ReplacingMergeTree(kafka_offset) ORDER BY (consumer_group, topic, kafka_partition)")
	}
	if len(cfg.Kafka) > 0 {
		s := add("CREATE TABLE IF NOT EXISTS ", db, ".", TableQueue, " (", columnList(wire.Columns), ") ENGINE = Kafka SETTINGS kafka_broker_list = ")
		s.S(Quote(strings.Join(cfg.Kafka, ",")), ", kafka_topic_list = ", Quote(cfg.Topic), ", kafka_group_name = ", Quote(cfg.Group),
			", kafka_format = 'RowBinary', kafka_num_consumers = ", fmt.Sprint(cfg.Consumers))
		views(TableQueue)
	}
	return stmts, warnings, nil
}

// OffsetColumns are TableOffsets' columns, in the order of their RowBinary
// rows.
const OffsetColumns = "consumer_group String, topic String, kafka_partition Int32, kafka_offset UInt64, at DateTime"

// colType is the ClickHouse type of a wire column.
func colType(name string) string {
	for _, c := range wire.Columns {
		if c.Name == name {
			return c.Type
		}
	}
	panic("clickhouse: no column " + name)
}

// SetupResult says what Setup found and did.
type SetupResult struct {
	Features   Features
	Statements int
	Warnings   []string
}

// Setup creates cfg's tables and views on the server behind c, idempotently,
// and checks that an existing flows table has the columns weir writes.
func Setup(ctx context.Context, c Conn, cfg Config) (*SetupResult, error) {
	f, err := Probe(ctx, c)
	if err != nil {
		return nil, err
	}
	stmts, warns, err := Statements(cfg, f)
	if err != nil {
		return nil, err
	}
	db := cfg.Database
	if db == "" {
		db = "weir"
	}
	for i, s := range stmts {
		if err := Exec(ctx, c, s); err != nil {
			return nil, fmt.Errorf("%w\n  in: %s", err, s.SQL())
		}
		if i == 1 { // the flows table: check it before views are tied to it
			if err := checkColumns(ctx, c, f, db, TableFlows, flowColumns()); err != nil {
				return nil, err
			}
		}
	}
	return &SetupResult{Features: f, Statements: len(stmts), Warnings: warns}, nil
}

// checkColumns compares a table's columns with want: a table of an older
// or foreign layout that IF NOT EXISTS kept is an error naming the
// difference.
func checkColumns(ctx context.Context, c Conn, f Features, db, table string, want []wire.Column) error {
	s := NewStmt(f.Params).S("SELECT name, type FROM system.columns WHERE database = ").Str(db).S(" AND table = ").Str(table).
		S(" ORDER BY position FORMAT RowBinary")
	// 18.16's system.columns has no position column: order by name there.
	if !f.Version.AtLeast(19, 1) {
		s = NewStmt(f.Params).S("SELECT name, type FROM system.columns WHERE database = ").Str(db).S(" AND table = ").Str(table).
			S(" FORMAT RowBinary")
	}
	rc, err := c.Do(ctx, s.SQL(), s.Params(), nil)
	if err != nil {
		return err
	}
	defer rc.Close()
	r := newReader(rc)
	var got []string
	for r.more() {
		got = append(got, r.str()+" "+r.str())
	}
	if r.err != nil {
		return r.err
	}
	exp := make([]string, len(want))
	for i, w := range want {
		exp[i] = w.Name + " " + w.Type
	}
	if !f.Version.AtLeast(19, 1) {
		slices.Sort(got)
		slices.Sort(exp)
	}
	if !slices.Equal(got, exp) {
		return fmt.Errorf("clickhouse: %s.%s exists with other columns than weir writes (it has %d, weir %d): "+
			"rename or drop it, or set up another database", db, table, len(got), len(exp))
	}
	return nil
}

// InsertRows sends wire rows (internal/wire.Append's, back to back) to the
// input table, from which the views fill flows and the rollups: the way to
// load records without Kafka.
func InsertRows(ctx context.Context, c Conn, db string, rows io.Reader) error {
	if err := CheckIdent("database", db); err != nil {
		return err
	}
	rc, err := c.Do(ctx, "INSERT INTO "+db+"."+TableInput+" FORMAT RowBinary", nil, rows)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, rc)
	return err
}
