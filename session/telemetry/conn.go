package telemetry

import "context"

// AttrConnectionID is the ACP connection a span's turn came in on: set by
// `acpd serve`, where one daemon serves many connections (absent on stdio,
// which has one).
const AttrConnectionID = "acpd.connection.id"

type connKey struct{}

// WithConnection returns ctx carrying an ACP connection id; the spans
// started from it carry AttrConnectionID.
func WithConnection(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, connKey{}, id)
}

// Connection is the connection id WithConnection put in ctx, or "".
func Connection(ctx context.Context) string {
	id, _ := ctx.Value(connKey{}).(string)
	return id
}
