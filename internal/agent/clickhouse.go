package agent

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/weir-dev/weir/internal/clickhouse"
	"github.com/weir-dev/weir/internal/sink/kafka"
)

// ClickHouseSetup is one 'weir clickhouse setup': the tables in
// ClickHouse and, with Brokers, the Kafka topic they ingest.
type ClickHouseSetup struct {
	URL, User, PasswordFile string // ClickHouse's HTTP interface and credentials
	Database, Topic, Group  string
	Consumers               int
	Brokers                 string // HOST:PORT[,HOST:PORT...]; "": no Kafka ingestion
	// Ingest is who reads the topic: "weir" (weir ingest, the default:
	// setup creates only the topic) or "kafka" (ClickHouse's Kafka
	// engine table and its views; exporters must use ?format=row).
	Ingest                  string
	Partitions, Replication int    // of the topic when setup creates it
	Retention               string // whole days (30d); "": none
	Stdout                  io.Writer
	Log                     io.Writer // warnings, as "weir clickhouse setup: warning: ..."
}

// Flags registers 'weir clickhouse setup's flags on fs, into s.
func (s *ClickHouseSetup) Flags(fs *flag.FlagSet) {
	fs.StringVar(&s.URL, "url", "", "ClickHouse's HTTP interface, http://HOST:PORT or https://HOST:PORT")
	fs.StringVar(&s.User, "user", "", "ClickHouse user (default: the server's default user)")
	fs.StringVar(&s.PasswordFile, "password-file", "", "file holding the user's password")
	fs.StringVar(&s.Database, "database", "weir", "database to create the tables in")
	fs.StringVar(&s.Brokers, "kafka", "", "Kafka brokers, HOST:PORT[,HOST:PORT...]: add the ingestion from Kafka")
	fs.StringVar(&s.Ingest, "ingest", "weir", "who reads the topic: weir (weir ingest; the default, many rows a message) or kafka (ClickHouse's Kafka engine; exporters need ?format=row)")
	fs.StringVar(&s.Topic, "topic", "weir-flows", "Kafka topic the agents export to (--export kafka://BROKERS/TOPIC)")
	fs.StringVar(&s.Group, "group", "weir-clickhouse", "Kafka consumer group of ClickHouse's Kafka engine (--ingest kafka)")
	fs.IntVar(&s.Consumers, "consumers", 1, "Kafka engine consumers (at most the topic's partitions)")
	fs.IntVar(&s.Partitions, "partitions", 4, "partitions of the topic when setup creates it")
	fs.IntVar(&s.Replication, "replication", 1, "replication factor of the topic when setup creates it")
	fs.StringVar(&s.Retention, "retention", "", "drop rows older than this (whole days: 30d) where the server has TTL (19.6+)")
}

// SetupClickHouse creates the topic unless it exists and the database's
// tables, within 5 minutes or until SIGINT. Mistakes in s are usage
// errors.
func SetupClickHouse(ctx context.Context, s ClickHouseSetup) error {
	if s.URL == "" {
		return usagef("--url is required (ClickHouse's HTTP interface, e.g. http://127.0.0.1:8123)")
	}
	cfg := clickhouse.Config{Database: s.Database, Topic: s.Topic, Group: s.Group, Consumers: s.Consumers}
	if s.Retention != "" {
		d, err := clickhouse.ParseRetention(s.Retention)
		if err != nil {
			return usagef("--retention: %v", err)
		}
		cfg.Retention = d
	}
	conn, err := clickhouse.NewHTTP(s.URL, s.User, s.PasswordFile)
	if err != nil {
		return usagef("%v", err)
	}
	kc, err := kafka.ParseURL("kafka://" + s.Brokers + "/" + s.Topic)
	if s.Brokers != "" && err != nil {
		return usagef("--kafka/--topic: %v", err)
	}
	switch s.Ingest {
	case "", "weir", "kafka":
	default:
		return usagef("--ingest %s: want weir (weir ingest reads the topic) or kafka (ClickHouse's Kafka engine)", s.Ingest)
	}
	if s.Brokers != "" && (s.Partitions < 1 || s.Replication < 1 || s.Partitions > 1<<16 || s.Replication > 16) {
		return usagef("--partitions and --replication must be positive")
	}
	ctx, cancel := signal.NotifyContext(ctx, os.Interrupt)
	defer cancel()
	ctx, cancel2 := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel2()
	if s.Brokers != "" {
		created, err := kafka.EnsureTopic(ctx, kc, int32(s.Partitions), int16(s.Replication))
		if created {
			fmt.Fprintf(s.Stdout, "created topic %s (%d partitions, replication %d)\n", kc.Topic, s.Partitions, s.Replication)
		}
		if err != nil {
			return err
		}
		if s.Ingest == "kafka" {
			cfg.Kafka = kc.Brokers
		}
	}
	res, err := clickhouse.Setup(ctx, conn, cfg)
	if err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(s.Log, "weir clickhouse setup: warning: %s\n", w)
	}
	ing := "no Kafka ingestion (records go to " + s.Database + "." + clickhouse.TableInput + ")"
	switch {
	case len(cfg.Kafka) > 0:
		ing = "ingesting " + s.Topic + " from " + strings.Join(cfg.Kafka, ",") + " as group " + s.Group +
			" with ClickHouse's Kafka engine (exporters must send one row a message: --export 'kafka://BROKERS/" + s.Topic + "?format=row')"
	case s.Brokers != "":
		ing = "topic " + s.Topic + " ready for weir ingest (weir ingest --kafka " + s.Brokers + " --topic " + s.Topic + " --clickhouse " + s.URL + ")"
		if q, err := hasTable(ctx, conn, res.Features, s.Database, clickhouse.TableQueue); err != nil {
			return err
		} else if q {
			fmt.Fprintf(s.Log, "weir clickhouse setup: warning: %s.%s (ClickHouse's Kafka engine) exists from an earlier --ingest kafka: "+
				"with weir ingest too every record would be inserted twice; drop it and its views (DROP TABLE %s.%s_mv, %s.%s_1m_mv, %s.%s_1h_mv, %s.%s)\n",
				s.Database, clickhouse.TableQueue, s.Database, clickhouse.TableQueue, s.Database, clickhouse.TableQueue, s.Database, clickhouse.TableQueue, s.Database, clickhouse.TableQueue)
		}
	}
	fmt.Fprintf(s.Stdout, "ClickHouse %v: database %s ready (%d statements), %s\n", res.Features.Version, s.Database, res.Statements, ing)
	return nil
}

// hasTable reports whether db.table exists.
func hasTable(ctx context.Context, c clickhouse.Conn, f clickhouse.Features, db, table string) (bool, error) {
	st := clickhouse.NewStmt(f.Params).S("SELECT count() FROM system.tables WHERE database = ").Str(db).S(" AND name = ").Str(table).S(" FORMAT TabSeparated")
	rc, err := c.Do(ctx, st.SQL(), st.Params(), nil)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	var n int
	_, err = fmt.Fscan(rc, &n)
	return n > 0, err
}
