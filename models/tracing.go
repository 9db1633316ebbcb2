package models

import (
	"context"
	"errors"
	"fmt"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// OpenTelemetry spans for the database's round trips, when the service traces (OTEL_* settings).
// On PostgreSQL every query, batch and prepare on a connection is a span, from pgx itself
// (github.com/exaring/otelpgx): GORM's statements, the pipelined transactions and the batched
// session reads alike. A batched session read is one query for many requests, so its span is in
// the trace of the request that ran it. On SQLite, in the process and with no round trips, GORM's
// statements are spans, from GORM callbacks here (gorm.io/plugin/opentelemetry would do it, but
// pulls in the MySQL, SQL Server and ClickHouse drivers); the prepared session read is not. Spans
// carry the statement with its placeholders, never the values bound to them (hashes, sealed
// e-mails, addresses).

// childOnly is a tracer provider whose spans exist only inside a trace already begun (a
// request's): the outbox workers' polls and the jobs' statements, with no request around them,
// would otherwise each start a trace of their own every few seconds.
type childOnly struct{ trace.TracerProvider }

func (p childOnly) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return childOnlyTracer{p.TracerProvider.Tracer(name, opts...)}
}

type childOnlyTracer struct{ trace.Tracer }

func (t childOnlyTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return t.Tracer.Start(ctx, name, opts...)
}

// tracePostgres makes cfg's connections trace their round trips under tp; nil leaves them be.
func tracePostgres(cfg *pgx.ConnConfig, tp trace.TracerProvider) {
	if tp == nil {
		return
	}
	cfg.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(childOnly{tp}), otelpgx.WithTrimSQLInSpanName())
}

// traceSQLite makes GORM's statements on db spans under tp; nil leaves it be.
func traceSQLite(db *gorm.DB, tp trace.TracerProvider) error {
	if tp == nil {
		return nil
	}
	tracer := childOnly{tp}.Tracer("codeauth/models")
	start := func(op string) func(*gorm.DB) {
		return func(tx *gorm.DB) {
			ctx, _ := tracer.Start(tx.Statement.Context, "sqlite "+op, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system.name", "sqlite"), attribute.String("db.operation.name", op)))
			tx.Statement.Context = ctx
		}
	}
	end := func(tx *gorm.DB) {
		span := trace.SpanFromContext(tx.Statement.Context)
		if !span.IsRecording() {
			return
		}
		span.SetAttributes(attribute.String("db.collection.name", tx.Statement.Table),
			attribute.String("db.query.text", tx.Statement.SQL.String()))
		if err := tx.Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			span.RecordError(err)
			span.SetStatus(codes.Error, "database error")
		}
		span.End()
	}
	cb := db.Callback()
	for _, p := range []struct {
		op          string
		before, aft interface {
			Register(string, func(*gorm.DB)) error
		}
	}{
		{"INSERT", cb.Create().Before("gorm:create"), cb.Create().After("gorm:create")},
		{"SELECT", cb.Query().Before("gorm:query"), cb.Query().After("gorm:query")},
		{"UPDATE", cb.Update().Before("gorm:update"), cb.Update().After("gorm:update")},
		{"DELETE", cb.Delete().Before("gorm:delete"), cb.Delete().After("gorm:delete")},
		{"ROW", cb.Row().Before("gorm:row"), cb.Row().After("gorm:row")},
		{"RAW", cb.Raw().Before("gorm:raw"), cb.Raw().After("gorm:raw")},
	} {
		if err := p.before.Register("codeauth:trace_start_"+p.op, start(p.op)); err != nil {
			return fmt.Errorf("models: tracing the database: %w", err)
		}
		if err := p.aft.Register("codeauth:trace_end_"+p.op, end); err != nil {
			return fmt.Errorf("models: tracing the database: %w", err)
		}
	}
	return nil
}
