"""What several Floe processes share: the Kafka wire codec and record batches
(``core.kafka``), the segment file format (``core.segment``), the object stores
(``core.storage``) and the SCRAM/ACL primitives (``core.security``).

Sans-IO and framework-free: nothing here imports Django, asyncio or an HTTP client, and
nothing here imports another Floe package. The agent, the control plane and the Spark
jobs all build on it.
"""
