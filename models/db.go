package models

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"
)

// Options say which database to open.
type Options struct {
	// DatabaseURL is a postgres:// URL; empty selects the embedded SQLite database.
	DatabaseURL string
	// SQLitePath is the file of the embedded database, created with its folder if missing.
	SQLitePath string
	// Now is the clock GORM uses for CreatedAt and UpdatedAt. It must return UTC.
	Now func() time.Time
	// Logger receives slow-query and error reports. It never sees query arguments.
	Logger *slog.Logger
	// Tracer, when set, makes a span of every database round trip (tracing.go); nil traces
	// nothing and costs nothing.
	Tracer trace.TracerProvider
}

// poolSize is how many connections to PostgreSQL the service keeps open at most.
const poolSize = 32

// Connections to PostgreSQL are renewed now and then, in the one pool every statement of the store
// uses (GORM's database/sql pool; the batched session reads and the shared rate-limit store take
// their connections from it too): a connection opened while the server was
// read-only, or before a failover, would otherwise keep its state for as long as it lived. A
// connection that reports such a state is dropped at once (dropBrokenConnection).
const (
	// ConnMaxLifetime is how long a connection is used at most.
	ConnMaxLifetime = 10 * time.Minute
	// ConnMaxIdleTime is how long an unused connection is kept.
	ConnMaxIdleTime = 5 * time.Minute
)

// dropBrokenConnection is pgx's OnPgError: it closes (returns false for) a connection whose
// error says the connection itself is no good any more, so the pool opens a new one instead of
// handing it out again. pgx's own default closes on FATAL only; a read-only transaction (25006)
// is added, because a connection that began while the server was read-only (a standby, or
// default_transaction_read_only set for the database or role) stays read-only after the server
// is writable again, and would fail every write until it aged out.
func dropBrokenConnection(_ *pgconn.PgConn, err *pgconn.PgError) bool {
	switch {
	case strings.EqualFold(err.Severity, "FATAL"), strings.EqualFold(err.Severity, "PANIC"), err.Code == "25006":
		return false
	}
	return true
}

// pgxConfig reads a postgres:// URL (or key=value DSN) into pgx's configuration, with the
// connection policy above.
func pgxConfig(databaseURL string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("reading the database URL: %w", err)
	}
	cfg.OnPgError = dropBrokenConnection
	if cfg.ConnectTimeout == 0 {
		// A server that accepts the connection and never answers (stopped, or a network that
		// drops packets) must not hold a connection attempt, and with it the start or a
		// request, for ever: connect_timeout in the URL sets another bound.
		cfg.ConnectTimeout = ConnectTimeout
	}
	return cfg, nil
}

// ConnectTimeout bounds the opening of a connection to PostgreSQL (the TCP connection and the
// start of the session) when the database URL sets no connect_timeout.
const ConnectTimeout = 10 * time.Second

// Open connects to the database chosen by opts and checks that it answers.
func Open(ctx context.Context, opts Options) (*gorm.DB, error) {
	var dialector gorm.Dialector
	if opts.DatabaseURL != "" {
		cfg, err := pgxConfig(opts.DatabaseURL)
		if err != nil {
			return nil, err
		}
		tracePostgres(cfg, opts.Tracer)
		dialector = postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cfg)})
	} else {
		if err := os.MkdirAll(filepath.Dir(opts.SQLitePath), 0o700); err != nil {
			return nil, fmt.Errorf("creating the data folder: %w", err)
		}
		// A new database file is readable by its owner only, whatever the folder it is in (a
		// DATA_DIR that already existed, readable by others) and the umask; SQLite gives its
		// -wal and -shm files the same permissions. An existing file keeps the operator's.
		if f, err := os.OpenFile(opts.SQLitePath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
			f.Close()
		} else if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("creating the database file: %w", err)
		}
		dialector = sqlite.Open(sqliteDSN(opts.SQLitePath))
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	db, err := gorm.Open(dialector, &gorm.Config{
		TranslateError:         true,
		NowFunc:                opts.Now,
		SkipDefaultTransaction: true,
		Logger:                 newLogger(log),
	})
	if err != nil {
		return nil, fmt.Errorf("opening the database: %w", err)
	}
	if err := registerPipelineCallbacks(db); err != nil {
		return nil, err
	}
	if opts.DatabaseURL == "" {
		if err := traceSQLite(db, opts.Tracer); err != nil {
			return nil, err
		}
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	if opts.DatabaseURL == "" {
		// One connection: SQLite allows one writer at a time, and a single connection turns
		// would-be "database is locked" failures into an orderly queue inside database/sql.
		sqlDB.SetMaxOpenConns(1)
	} else {
		sqlDB.SetMaxOpenConns(poolSize)
		sqlDB.SetMaxIdleConns(poolSize)
		sqlDB.SetConnMaxLifetime(ConnMaxLifetime)
		sqlDB.SetConnMaxIdleTime(ConnMaxIdleTime)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqlDB.PingContext(pingCtx); err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("connecting to the database: %w", err)
	}
	return db, nil
}

// sqliteDSN turns on WAL (readers never wait for the writer), foreign keys, a busy timeout and
// immediate transactions, which take the write lock up front instead of failing to upgrade later.
// The path is escaped for SQLite's file: URI, in which '?' starts the settings and '#' ends the
// name: unescaped, a DATA_DIR such as "/srv/app#2" opened the file "/srv/app".
func sqliteDSN(path string) string {
	path = sqlitePathEscaper.Replace(path)
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// sqlitePathEscaper percent-escapes what SQLite's URI parser reads in a file name: '%' itself,
// '?' and '#'.
var sqlitePathEscaper = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")

// forUpdate makes q's SELECT lock the rows it reads until the transaction ends, on PostgreSQL.
// SQLite needs no row locks: its transactions take the database's one write lock up front
// (_txlock=immediate), so they never interleave.
func forUpdate(q *gorm.DB) *gorm.DB {
	if q.Dialector.Name() != "postgres" {
		return q
	}
	return q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// migrationLock names the PostgreSQL advisory lock that serialises migrations when several
// instances start at once; with the schema, so separate schemas migrate independently.
const migrationLock = "codeauth migrations"

// Migrate creates or updates every table and index. On PostgreSQL the whole migration is one
// transaction holding a transaction advisory lock, so instances starting together migrate one
// after the other, and a failed migration changes nothing. A transaction lock, not a session one,
// so that it is right through a pooler in transaction mode (PgBouncer), where a session's
// statements may each run on another server connection.
func Migrate(ctx context.Context, db *gorm.DB) error {
	db = db.WithContext(ctx)
	if db.Dialector.Name() == "postgres" {
		err := db.Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(hashtext(current_schema()), hashtext(?))", migrationLock).Error; err != nil {
				return fmt.Errorf("taking the migration lock: %w", err)
			}
			return migrate(tx)
		})
		if err != nil {
			return err
		}
	} else if err := migrate(db); err != nil {
		return err
	}
	return dropReplacedIndexes(db)
}

// dropReplacedIndexes drops the droppedIndexes still there, on PostgreSQL after the migration's
// commit and CONCURRENTLY. A plain DROP INDEX needs its table's exclusive lock: in the migration's
// transaction, which had just locked the table against writes by creating the index that
// replaces it, it deadlocked with a request of an instance still serving (one that had read the
// table and then wrote it), and while it waited behind any open reader every new request's read
// of the table queued behind it. CONCURRENTLY still waits for the transactions open on the
// table to end (a pg_dump holds up the first start of a version that drops an index, not the
// requests). Instances that start together may race to drop one index: an index gone meanwhile
// is what they wanted.
func dropReplacedIndexes(db *gorm.DB) error {
	m := db.Migrator()
	for _, d := range droppedIndexes {
		if !m.HasIndex(d.model, d.name) {
			continue
		}
		var err error
		if db.Dialector.Name() == "postgres" {
			err = db.Exec(`DROP INDEX CONCURRENTLY IF EXISTS "` + d.name + `"`).Error
		} else {
			err = m.DropIndex(d.model, d.name)
		}
		if err != nil && m.HasIndex(d.model, d.name) {
			return fmt.Errorf("dropping index %s: %w", d.name, err)
		}
	}
	return nil
}

// droppedIndexes are indexes earlier versions created that the models no longer declare.
var droppedIndexes = []struct {
	model any
	name  string
}{
	{&OutboxMessage{}, "idx_outbox_due"},       // replaced by the partial idx_outbox_pending (since replaced too)
	{&User{}, "idx_users_deleted_at"},          // replaced by the partial idx_users_deleted
	{&OutboxMessage{}, "idx_outbox_supersede"}, // replaced by the partial idx_outbox_supersede_key
	{&OutboxMessage{}, "idx_outbox_pending"},   // replaced by idx_outbox_due_email and _webhook
}

func migrate(db *gorm.DB) error {
	if err := db.AutoMigrate(All()...); err != nil {
		return err
	}
	if db.Dialector.Name() == "postgres" {
		// An outbox payload is ciphertext: compression cannot shrink it, and moving a large one
		// (a rendered e-mail, as versions before drafts stored) out of line to the TOAST table
		// costs the message two more row and index inserts, and a third write when the payload
		// is dropped after delivery. Rows up to a page are kept whole instead.
		if err := db.Exec("ALTER TABLE outbox SET (toast_tuple_target = 8160)").Error; err != nil {
			return fmt.Errorf("setting the outbox's storage: %w", err)
		}
		// Codes are deleted once used, so VACUUM finds their table nearly empty and would cut its
		// file down to nothing. PostgreSQL plans a table of no pages with sequential scans, and a
		// prepared statement keeps its plan while the table fills with dead rows until the next
		// VACUUM: in 10 s of sign-ups every statement on a code (the live-code check, the
		// attempt, the consumption; three a sign-in) read all of it, 7,000 dead rows by the end.
		// Kept at its size (its free pages are reused), the table is planned with its indexes,
		// at no cost to any statement; it can only plan a sequential scan while it has always been
		// small, when one costs little.
		if err := db.Exec("ALTER TABLE verifications SET (vacuum_truncate = off)").Error; err != nil {
			return fmt.Errorf("setting the codes' storage: %w", err)
		}
	}
	return nil
}

// gormLogger reports errors and slow queries through slog without query arguments, which may
// hold token hashes or e-mail addresses.
type gormLogger struct {
	log  *slog.Logger
	slow time.Duration
}

func newLogger(log *slog.Logger) logger.Interface {
	return &gormLogger{log: log, slow: 500 * time.Millisecond}
}

func (l *gormLogger) LogMode(logger.LogLevel) logger.Interface { return l }

func (l *gormLogger) Info(ctx context.Context, msg string, args ...any) {
	msg, attrs := gormMessage(msg, args)
	l.log.DebugContext(ctx, msg, attrs...)
}

func (l *gormLogger) Warn(ctx context.Context, msg string, args ...any) {
	msg, attrs := gormMessage(msg, args)
	l.log.WarnContext(ctx, msg, attrs...)
}

func (l *gormLogger) Error(ctx context.Context, msg string, args ...any) {
	msg, attrs := gormMessage(msg, args)
	l.log.ErrorContext(ctx, msg, attrs...)
}

// gormMessage turns one of GORM's printf-style messages into a log record's message and
// attributes: its verbs are taken out, and of its arguments only the errors are kept (as
// "error"), whose text names no parameter; the others may be values of a query.
func gormMessage(msg string, args []any) (string, []any) {
	var attrs []any
	for _, a := range args {
		if err, ok := a.(error); ok {
			attrs = append(attrs, "error", err)
		}
	}
	msg = strings.NewReplacer("%v", "", "%s", "", "%w", "", "%d", "").Replace(msg)
	return "gorm: " + strings.TrimRight(strings.TrimSpace(msg), ",:"), attrs
}

// Trace logs slow statements only; failed ones are logged by whoever handles the error, so
// expected failures (a unique-key conflict that is part of the logic) stay out of the error log.
func (l *gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if elapsed := time.Since(begin); elapsed > l.slow {
		l.log.WarnContext(ctx, "slow query", "elapsed", elapsed)
	}
}

// readyProbe is a write that changes nothing: both databases refuse it where they refuse writes
// (PostgreSQL in a read-only transaction or on a standby, before looking at a row; SQLite when
// the file or the connection is read-only), and otherwise it touches no row, so it writes no
// WAL and takes no transaction id.
const readyProbe = "UPDATE auth_throttle SET count = count WHERE 1 = 0"

// Ready reports whether the database can take writes now, without writing anything. A ping alone
// passes while a read-only server fails every write.
func Ready(ctx context.Context, db *gorm.DB) error {
	sqlDB, err := db.DB()
	if err != nil {
		return err
	}
	_, err = sqlDB.ExecContext(ctx, readyProbe)
	return err
}
