// Package dashboards holds weir's Grafana dashboards (docs/grafana.md):
// weir-health.json over weir's Prometheus metrics and weir-flows.json over
// ClickHouse. It has no code; its test checks the dashboards.
package dashboards
