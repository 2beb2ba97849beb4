// Package grafana holds Foldline's Grafana dashboard, foldline.json: lag
// per stage, view freshness, the sinks' write latency, dead letters by
// reason, estimated rows and backfill progress, from the metrics the
// function instances, foldline metrics, verify --every and backfill
// --metrics-listen serve (docs/observability.md). Import it into Grafana
// and pick the Prometheus data source and the tenant.
//
// Its test checks that every metric its queries name is one the code
// exports, by the names' constants.
package grafana

import _ "embed"

// Dashboard is foldline.json.
//
//go:embed foldline.json
var Dashboard []byte
