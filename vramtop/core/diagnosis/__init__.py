"""The diagnosis: findings opened and closed from samples and events, each with its report.

`diagnoser` holds the rules (when a finding opens and closes), `thresholds` their numbers;
each finding kind's report is a module of its own (`contention`, `memory_evidence`,
`slowdown`, `kv_pressure`, `throttling`, `server_down`), a typed `Report`
(`vramtop.core.findings`) whose evidence for the squeeze kinds is in `squeeze_facts`;
`rates` and `normal_rate` are what a slowdown is measured against. Import each name from
the module that defines it.
"""
