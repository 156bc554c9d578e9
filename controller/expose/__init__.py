"""The watch's numbers exposed to Prometheus (`dfctl watch --metrics-port`, `dfctl export-metrics`).

    metric_families.py   a tick's RunStates / HostSamples / JobStates -> gauge families
    scrape_endpoint.py   the collector (the latest tick's families) and its HTTP server
    live_fleet.py        every live run of the registry under one Watch (export-metrics)
"""
