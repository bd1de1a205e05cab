"""`vramtop export`: the exporter (sampling in the background, serving the latest sample as
Prometheus text) and its package data, the alert rules and the Grafana dashboard."""
