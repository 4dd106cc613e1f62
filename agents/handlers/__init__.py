"""One module per Kafka API family; each handler is `async (ctx, header, body) -> dict |
None` and is routed by ``agents.dispatch``. ``errors`` answers a request that failed as
a whole."""
