"""HTTP for the tests, through one client that keeps no connection: each request opens and
closes its own, as `httpx.get` does. `httpx.get` builds a client for every call, and with it
a TLS context loaded with the CA bundle (about 23 ms of CPU, on plain-http loopback too): a
wait that asks a server every 20 ms spent a whole core on it, and the suite is CPU-bound."""

from __future__ import annotations

import httpx

# Loopback servers only: no proxy from the environment is ever used.
CLIENT = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), trust_env=False)

get = CLIENT.get
post = CLIENT.post
request = CLIENT.request
stream = CLIENT.stream
