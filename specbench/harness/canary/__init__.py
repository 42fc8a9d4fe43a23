"""`specbench canary`: one look (`canary.look`) over request logs (`canary.logs`), Prometheus
(`canary.promapi`) or a direct scrape (`canary.scrape`) of engine counters (`canary.counters`); the
HTTP gate (`canary.gate`) and the alerting rules (`canary.rules`)."""
